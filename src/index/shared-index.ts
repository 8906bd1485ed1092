import {
  checkHighWaterRatio,
  checkPositiveInteger,
  DEFAULT_HIGH_WATER_RATIO,
  DEFAULT_MAX_CHARS,
  highWaterMark,
} from "../tree/char-budget.js";
import {
  addChild,
  childOf,
  childrenOf,
  isLeaf,
  removeChild,
  replaceChild,
} from "../tree/child-container.js";
import { LeafQueue } from "../tree/leaf-queue.js";
import { edgeMatch, isHigh, isLow, ownCopy } from "../tree/radix-tree.js";
import type { EvictionUnit, PrefixIndex } from "./prefix-index.js";
import { Claim, type ClaimOwner, claimOf, SharedNode } from "./shared-node.js";

export interface SharedIndexOptions {
  /** Budget of each worker, in characters (default 2^26). */
  maxTreeSize?: number;
  /** Called with the characters evicted by any eviction (metrics). */
  onEvict?: (evictedChars: number) => void;
  /** An insert that takes a worker above budget x this evicts at once (default 1.1, >= 1). */
  highWaterRatio?: number;
  /**
   * Most characters one eviction slice removes (default 2^20): the timer evicts one slice per turn
   * of the event loop, so a large eviction never holds requests up for long.
   */
  sliceChars?: number;
}

/** Most claims one slice removes, whatever their length (bounds a slice of tiny labels). */
const SLICE_CLAIMS = 16_384;
const DEFAULT_SLICE_CHARS = 1 << 20;

/** One worker's part of the index: its budget, its characters and its LRU of leaf claims. */
class WorkerClaims implements ClaimOwner, EvictionUnit {
  budget: number;
  highWater: number;
  chars = 0;
  readonly leaves: LeafQueue<Claim>;

  constructor(
    readonly id: string,
    readonly slot: number,
    budget: number,
    private readonly index: SharedIndex,
  ) {
    this.budget = budget;
    this.highWater = index.highWaterOf(budget);
    this.leaves = new LeafQueue<Claim>(new Claim(this, new SharedNode("", -1, null), null, 0));
  }

  /** One slice of eviction towards the budget (what the eviction timer calls). */
  evict(): number {
    return this.index.evictSlice(this, this.budget, false);
  }
}

/**
 * One tree per model holding every worker's routed texts, whose nodes record which workers hold
 * them (the SGLang router's shared radix tree, in TypeScript): matching walks the text once and
 * reads every worker's matched length from the claims met on the way, so a decision costs the
 * prompt's length plus one read per claim on the path, not prompt x workers.
 *
 * Each worker keeps its own budget and LRU over its own claims (logical clock, as in
 * tree/radix-tree.ts): evicting a worker's least recently used leaf claim drops only that claim,
 * and a node goes only when no worker claims it any more. Lengths are in UTF-16 code units at code
 * point boundaries, exactly as the per-worker trees count them.
 */
export class SharedIndex implements PrefixIndex {
  readonly name = "shared";
  private readonly budget: number;
  private readonly onEvict: ((evictedChars: number) => void) | undefined;
  private readonly sliceChars: number;
  private readonly highWaterRatio: number;
  /** Roots by model ("" for none); a root whose tree empties is dropped. */
  private readonly roots = new Map<string, SharedNode>();
  private readonly workers = new Map<string, WorkerClaims>();
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  private clock = 0;
  private nodes = 0;
  /** Scratch for match, by worker slot: matched length, valid when stamp === the match's stamp. */
  private readonly held: number[] = [];
  private readonly stamps: number[] = [];
  private stamp = 0;
  /** The last candidate list's ids and slots, reused while the fleet is unchanged. */
  private candidateIds: (string | undefined)[] = [];
  private candidateSlots: number[] = [];

  /** Throws a RangeError naming the option when an option is invalid. */
  constructor(options: SharedIndexOptions = {}) {
    this.budget = checkBudget(options.maxTreeSize ?? DEFAULT_MAX_CHARS);
    this.sliceChars = checkPositiveInteger(
      "SharedIndex",
      "sliceChars",
      options.sliceChars ?? DEFAULT_SLICE_CHARS,
    );
    this.highWaterRatio = checkHighWaterRatio(
      "SharedIndex",
      options.highWaterRatio ?? DEFAULT_HIGH_WATER_RATIO,
    );
    this.onEvict = options.onEvict;
  }

  addWorker(workerId: string): void {
    if (this.workers.has(workerId)) return;
    const slot = this.freeSlots.pop() ?? this.nextSlot++;
    this.workers.set(workerId, new WorkerClaims(workerId, slot, this.budget, this));
    this.held[slot] = 0;
    this.stamps[slot] = 0;
    this.candidateIds = [];
  }

  removeWorker(workerId: string): void {
    const worker = this.workers.get(workerId);
    if (worker === undefined) return;
    for (const root of [...this.roots.values()]) {
      for (const child of [...childrenOf(root)]) {
        const claim = claimOf(child, worker);
        if (claim !== undefined) this.dropSubtree(claim);
      }
    }
    this.workers.delete(workerId);
    this.freeSlots.push(worker.slot);
    this.candidateIds = [];
  }

  match(
    text: string,
    model: string | undefined,
    workers: readonly { readonly id: string }[],
    out: number[],
  ): void {
    const count = workers.length;
    const root = this.roots.get(model ?? "");
    if (root === undefined || text.length === 0) {
      for (let i = 0; i < count; i++) out[i] = 0;
      return;
    }
    const held = this.held;
    const stamps = this.stamps;
    const stamp = ++this.stamp;
    const n = text.length;
    let node = root;
    let pos = 0;
    while (pos < n) {
      const child = childOf(node, text.codePointAt(pos)!);
      if (child === undefined) break;
      const label = child.label;
      const k = edgeMatch(text, pos, label);
      const end = pos + k;
      // Claims are prefix-closed, so a deeper node's claim overwrites what its ancestors said.
      const claims = child.claims;
      for (let c = 0; c < claims.length; c++) {
        const slot = claims[c]!.owner.slot;
        held[slot] = end;
        stamps[slot] = stamp;
      }
      if (k !== label.length) break;
      node = child;
      pos = end;
    }
    const slots = this.slotsOf(workers);
    for (let i = 0; i < count; i++) {
      const slot = slots[i]!;
      out[i] = slot >= 0 && stamps[slot] === stamp ? held[slot]! : 0;
    }
  }

  insert(workerId: string, model: string | undefined, text: string): void {
    const worker = this.workers.get(workerId);
    const n = text.length;
    if (worker === undefined || n === 0) return;
    const modelKey = model ?? "";
    let root = this.roots.get(modelKey);
    if (root === undefined) {
      // A root's label names its model (roots are never matched as edges).
      root = new SharedNode(modelKey, -1, null);
      this.roots.set(modelKey, root);
    }
    const now = ++this.clock;
    let node = root;
    let up: Claim | null = null;
    let pos = 0;
    while (pos < n) {
      const key = text.codePointAt(pos)!;
      let child = childOf(node, key);
      if (child === undefined) {
        child = new SharedNode(ownCopy(text.slice(pos)), key, node);
        addChild(node, child);
        this.nodes++;
        up = this.claim(worker, child, up, now);
        break;
      }
      const k = edgeMatch(text, pos, child.label);
      // Diverged inside the edge (k >= 1: the first code points are equal): split it at k.
      if (k !== child.label.length) child = this.split(node, child, k);
      up = this.claim(worker, child, up, now);
      node = child;
      pos += k;
    }
    // The path's last claim is the worker's newest leaf unless the worker holds more below it.
    if (up !== null && up.children === 0) {
      worker.leaves.detach(up);
      worker.leaves.append(up);
    }
    if (worker.chars > worker.highWater) this.evictSlice(worker, worker.budget, true);
  }

  truncate(workerId: string, model: string | undefined, text: string, keep: number): number {
    if (typeof keep !== "number" || Number.isNaN(keep) || keep < 0) {
      throw new RangeError(`SharedIndex truncate keep must be a number >= 0, got ${String(keep)}`);
    }
    const worker = this.workers.get(workerId);
    const root = this.roots.get(model ?? "");
    const n = text.length;
    let cut = Math.floor(keep);
    if (worker === undefined || root === undefined || cut >= n) return 0;
    if (cut > 0 && isLow(text.charCodeAt(cut)) && isHigh(text.charCodeAt(cut - 1))) cut--;
    let node = root;
    let pos = 0;
    while (pos < n) {
      let child = childOf(node, text.codePointAt(pos)!);
      if (child === undefined) return 0;
      const claim = claimOf(child, worker);
      if (claim === undefined) return 0;
      const k = edgeMatch(text, pos, child.label);
      if (pos + k <= cut) {
        // Everything this edge shares with text is within what is kept.
        if (k !== child.label.length) return 0;
        node = child;
        pos += k;
        continue;
      }
      // The cut falls inside this edge: split there, so the other workers keep the whole edge
      // and this worker keeps the head. Then drop the worker's claims from the cut down.
      if (pos < cut) child = this.split(node, child, cut - pos).kids![0]!;
      return this.dropSubtree(claimOf(child, worker)!);
    }
    return 0;
  }

  setBudget(workerId: string, chars: number): number {
    checkBudget(chars);
    const worker = this.workers.get(workerId);
    if (worker === undefined) return 0;
    worker.budget = chars;
    // A set budget is what the engine can hold (PrefixIndex.setBudget): no high-water slack.
    worker.highWater = chars;
    let evicted = 0;
    while (worker.chars > chars) {
      const slice = this.evictSlice(worker, chars, false);
      if (slice === 0) break;
      evicted += slice;
    }
    return evicted;
  }

  size(workerId: string): number {
    return this.workers.get(workerId)?.chars ?? 0;
  }

  /**
   * One unit per eviction slice a worker needs to get back to its budget (a worker far over
   * budget appears several times), so the timer's one-unit-per-turn sweep never runs long.
   */
  evictionUnits(): Iterable<EvictionUnit> {
    const units: EvictionUnit[] = [];
    for (const worker of this.workers.values()) {
      const excess = worker.chars - worker.budget;
      for (let i = 0; i < excess; i += this.sliceChars) units.push(worker);
    }
    return units;
  }

  /** Characters above which an insert evicts at once, for a budget. */
  highWaterOf(budget: number): number {
    return highWaterMark(budget, this.highWaterRatio);
  }

  /** Nodes in all trees (roots not counted). */
  get nodeCount(): number {
    return this.nodes;
  }

  /** Characters in all trees, each node counted once however many workers claim it. */
  get charCount(): number {
    let chars = 0;
    for (const root of this.roots.values()) {
      const stack = [...childrenOf(root)];
      for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
        chars += node.label.length;
        stack.push(...childrenOf(node));
      }
    }
    return chars;
  }

  /**
   * Evicts the worker's least recently used leaf claims until it holds at most `target`
   * characters, stopping after one slice (sliceChars characters or SLICE_CLAIMS claims) unless
   * `toHighWater` and the worker is still above its high-water mark (an insert must not leave
   * memory growing). Returns the characters evicted.
   */
  evictSlice(worker: WorkerClaims, target: number, toHighWater: boolean): number {
    let evicted = 0;
    let claims = 0;
    while (worker.chars > target) {
      if (
        (evicted >= this.sliceChars || claims >= SLICE_CLAIMS) &&
        !(toHighWater && worker.chars > worker.highWater)
      ) {
        break;
      }
      const leaf = worker.leaves.popOldest();
      if (leaf === undefined) break;
      evicted += this.dropClaim(leaf);
      claims++;
    }
    if (evicted > 0 && this.onEvict !== undefined) this.onEvict(evicted);
    return evicted;
  }

  /**
   * For tests: throws unless every invariant holds (claims prefix-closed and linked to the parent's
   * claim, child counts, each worker's characters and leaf queue, no unclaimed node). Returns the
   * characters each worker holds, by a full traversal.
   */
  check(): Map<string, number> {
    const chars = new Map<string, number>();
    const leafClaims = new Map<ClaimOwner, Set<Claim>>();
    for (const worker of this.workers.values()) {
      chars.set(worker.id, 0);
      leafClaims.set(worker, worker.leaves.check());
    }
    let nodes = 0;
    for (const [model, root] of this.roots) {
      if (isLeaf(root)) throw new Error(`empty tree kept for model ${JSON.stringify(model)}`);
      if (root.claims.length > 0) throw new Error("root claimed");
      const stack = [...childrenOf(root)];
      for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
        nodes++;
        const kids = [...childrenOf(node)];
        stack.push(...kids);
        if (node.claims.length === 0) throw new Error("unclaimed node");
        const owners = new Set<ClaimOwner>();
        for (const claim of node.claims) {
          const worker = claim.owner as WorkerClaims;
          if (owners.has(worker)) throw new Error("worker claims a node twice");
          owners.add(worker);
          if (this.workers.get(worker.id) !== worker) throw new Error("claim of a removed worker");
          if (claim.node !== node) throw new Error("claim points at another node");
          const parentClaim = node.parent === root ? null : claimOf(node.parent!, worker);
          if (claim.up !== (parentClaim ?? null)) throw new Error("claim not linked to parent's");
          const below = kids.filter((kid) => claimOf(kid, worker) !== undefined).length;
          if (claim.children !== below) throw new Error("claim child count wrong");
          if ((below === 0) !== leafClaims.get(worker)!.has(claim)) {
            throw new Error("leaf queue disagrees with the worker's leaf claims");
          }
          chars.set(worker.id, chars.get(worker.id)! + node.label.length);
        }
      }
    }
    if (nodes !== this.nodes) throw new Error("node count wrong");
    for (const worker of this.workers.values()) {
      if (chars.get(worker.id) !== worker.chars) throw new Error("worker char count wrong");
    }
    return chars;
  }

  /** The worker's claim on `node`, made (and counted) if it had none; refreshes its recency. */
  private claim(worker: WorkerClaims, node: SharedNode, up: Claim | null, now: number): Claim {
    const found = claimOf(node, worker);
    if (found !== undefined) {
      found.access = now;
      return found;
    }
    const claim = new Claim(worker, node, up, now);
    node.claims.push(claim);
    worker.chars += node.label.length;
    // The parent's claim stops being a leaf of the worker's LRU.
    if (up !== null && up.children++ === 0) worker.leaves.detach(up);
    return claim;
  }

  /**
   * Splits `child` (under `parent`) after its first `k` code units; returns the new upper node.
   * Every claim on the child is copied onto the upper node with the same recency, so each
   * worker's characters and leaves stay what they were.
   */
  private split(parent: SharedNode, child: SharedNode, k: number): SharedNode {
    const label = child.label;
    const upper = new SharedNode(ownCopy(label.slice(0, k)), child.key, parent);
    const tail = ownCopy(label.slice(k));
    child.label = tail;
    child.key = tail.codePointAt(0)!;
    child.parent = upper;
    upper.kids = [child];
    replaceChild(parent, child, upper);
    const claims = child.claims;
    const copies = new Array<Claim>(claims.length);
    for (let i = 0; i < claims.length; i++) {
      const below = claims[i]!;
      const copy = new Claim(below.owner, upper, below.up, below.access);
      copy.children = 1;
      below.up = copy;
      copies[i] = copy;
    }
    upper.claims = copies;
    this.nodes++;
    return upper;
  }

  /**
   * Removes one claim that has no claims of its worker below it; its parent claim becomes a leaf
   * when this was its last child, and the node goes when no one claims it. Returns its characters.
   */
  private dropClaim(claim: Claim): number {
    const worker = claim.owner as WorkerClaims;
    const node = claim.node;
    worker.leaves.detach(claim);
    const claims = node.claims;
    const last = claims.pop()!;
    if (last !== claim) claims[claims.indexOf(claim)] = last;
    const len = node.label.length;
    worker.chars -= len;
    const up = claim.up;
    if (up !== null && --up.children === 0) worker.leaves.promote(up);
    if (claims.length === 0) {
      // No one else holds it, hence no one holds anything below it either: it is a leaf.
      const parent = node.parent!;
      removeChild(parent, node);
      node.parent = null;
      this.nodes--;
      if (parent.parent === null && isLeaf(parent)) this.roots.delete(parent.label);
    }
    return len;
  }

  /** Drops `top` and every claim of the same worker below it; returns the characters dropped. */
  private dropSubtree(top: Claim): number {
    const worker = top.owner;
    const order: Claim[] = [];
    const stack = [top];
    for (let claim = stack.pop(); claim !== undefined; claim = stack.pop()) {
      order.push(claim);
      if (claim.children === 0) continue;
      for (const kid of childrenOf(claim.node)) {
        const below = claimOf(kid, worker);
        if (below !== undefined) stack.push(below);
      }
    }
    let dropped = 0;
    // Deepest first, so each claim is a leaf when it goes.
    for (let i = order.length - 1; i >= 0; i--) dropped += this.dropClaim(order[i]!);
    return dropped;
  }

  /** Slots of the candidates (-1 for an unknown worker), cached while the same ids come back. */
  private slotsOf(workers: readonly { readonly id: string }[]): number[] {
    const count = workers.length;
    let ids = this.candidateIds;
    const slots = this.candidateSlots;
    if (ids.length !== count) {
      ids = this.candidateIds = new Array<string | undefined>(count).fill(undefined);
      slots.length = count;
    }
    for (let i = 0; i < count; i++) {
      const id = workers[i]!.id;
      if (ids[i] !== id) {
        ids[i] = id;
        slots[i] = this.workers.get(id)?.slot ?? -1;
      }
    }
    return slots;
  }
}

function checkBudget(chars: number): number {
  return checkPositiveInteger("SharedIndex", "budget", chars);
}
