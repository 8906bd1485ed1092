import {
  checkHighWaterRatio,
  checkPositiveInteger,
  DEFAULT_HIGH_WATER_RATIO,
  DEFAULT_MAX_CHARS,
  highWaterMark,
  keptOf,
} from "../tree/char-budget.js";
import { addChild, childOf, childrenOf, isLeaf } from "../tree/child-container.js";
import { edgeMatch, isHigh, isLow, keyAt, ownCopy } from "../tree/edge-match.js";
import { type AgedLeaf, newestLeafPaths } from "../tree/leaf-paths.js";
import type { EvictionUnit, IndexPath, PrefixIndex } from "./prefix-index.js";
import { charsOf, SharedForest, WorkerClaims, type WorkerEviction } from "./shared-forest.js";
import { type Claim, type ClaimOwner, claimOf, SharedNode } from "./shared-node.js";

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
export class SharedIndex implements PrefixIndex, WorkerEviction {
  readonly name = "shared";
  private readonly budget: number;
  private readonly onEvict: ((evictedChars: number) => void) | undefined;
  private readonly sliceChars: number;
  private readonly highWaterRatio: number;
  /** The trees, one per model, and the claim surgery on them. */
  private readonly forest = new SharedForest();
  private readonly workers = new Map<string, WorkerClaims>();
  private readonly freeSlots: number[] = [];
  private nextSlot = 0;
  private clock = 0;
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
    for (const root of [...this.forest.roots.values()]) {
      for (const child of [...childrenOf(root)]) {
        const claim = claimOf(child, worker);
        if (claim !== undefined) this.forest.dropSubtree(claim);
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
    const root = this.forest.root(model, false);
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
      const child = childOf(node, keyAt(text, pos));
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
    const forest = this.forest;
    const root = forest.root(model, true)!;
    const now = ++this.clock;
    let node = root;
    let up: Claim | null = null;
    let pos = 0;
    while (pos < n) {
      const key = keyAt(text, pos);
      let child = childOf(node, key);
      if (child === undefined) {
        child = new SharedNode(ownCopy(text.slice(pos)), key, node);
        addChild(node, child);
        forest.nodeCount++;
        up = forest.claim(worker, child, up, now);
        break;
      }
      const k = edgeMatch(text, pos, child.label);
      // Diverged inside the edge (k >= 1: the first code points are equal): split it at k.
      if (k !== child.label.length) child = forest.split(node, child, k);
      up = forest.claim(worker, child, up, now);
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
    const root = this.forest.root(model, false);
    const n = text.length;
    let cut = Math.floor(keep);
    if (worker === undefined || root === undefined || cut >= n) return 0;
    if (cut > 0 && isLow(text.charCodeAt(cut)) && isHigh(text.charCodeAt(cut - 1))) cut--;
    let node = root;
    let pos = 0;
    while (pos < n) {
      let child = childOf(node, keyAt(text, pos));
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
      if (pos < cut) child = this.forest.split(node, child, cut - pos).kids![0]!;
      return this.forest.dropSubtree(claimOf(child, worker)!);
    }
    return 0;
  }

  setBudget(workerId: string, chars: number): number {
    checkBudget(chars);
    const worker = this.workers.get(workerId);
    if (worker === undefined) return 0;
    worker.learned = chars;
    return this.keepBeside(worker);
  }

  reserve(workerId: string, chars: number): number {
    const worker = this.workers.get(workerId);
    if (worker === undefined || worker.learned === undefined) return 0;
    const reserve = Math.max(0, chars);
    // Asked on every decision for every candidate: mostly unchanged, and then the worker is
    // already within that budget (every insert keeps it there).
    if (reserve === worker.reserve) return 0;
    worker.reserve = reserve;
    return this.keepBeside(worker);
  }

  /** A learned budget, less the worker's reserve, made its budget: evicts down to it at once. */
  private keepBeside(worker: WorkerClaims): number {
    const chars = keptOf(worker.learned!, worker.reserve);
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

  fill(workerId: string): number | undefined {
    const worker = this.workers.get(workerId);
    return worker?.learned !== undefined ? Math.min(1, worker.chars / worker.budget) : undefined;
  }

  /**
   * One unit per eviction slice a worker needs to get back to its budget (a worker far over
   * budget appears several times), so the timer's one-unit-per-turn sweep never runs long.
   */
  paths(workerId: string, maxChars: number): IndexPath[] | undefined {
    const worker = this.workers.get(workerId);
    if (worker === undefined) return undefined;
    // Per model: the budget is the worker's, spent on its newest leaves whatever their model.
    const all: { at: number; path: IndexPath }[] = [];
    for (const [key, root] of this.forest.roots) {
      const leaves: AgedLeaf<SharedNode>[] = [];
      const stack = [...childrenOf(root)];
      for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
        const claim = claimOf(node, worker);
        if (claim === undefined) continue;
        if (claim.children === 0) leaves.push({ node, access: claim.access });
        else stack.push(...childrenOf(node));
      }
      const model = key === "" ? undefined : key;
      const texts = newestLeafPaths(leaves, maxChars);
      // newestLeafPaths sorted `leaves` newest first: the i-th text is the i-th leaf's.
      for (let i = 0; i < texts.length; i++)
        all.push({ at: leaves[i]!.access, path: { model, text: texts[i]! } });
    }
    all.sort((a, b) => b.at - a.at);
    return all.map((a) => a.path);
  }

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
    return this.forest.nodeCount;
  }

  /** Characters in all trees, each node counted once however many workers claim it. */
  get charCount(): number {
    return this.forest.charCount;
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
      // A budget from the engine's capacity is evicted as its block LRU does: only the excess,
      // off the end of the oldest leaf (RadixTree.evict).
      if (worker.learned !== undefined) this.splitOffTail(leaf, worker.chars - target);
      evicted += this.forest.dropClaim(leaf);
      claims++;
    }
    if (evicted > 0 && this.onEvict !== undefined) this.onEvict(evicted);
    return evicted;
  }

  /**
   * Splits the node of `leaf` (a claim just popped as its worker's oldest) so that its last
   * `excess` characters (one more where the cut would split a surrogate pair) are a node of their
   * own, which `leaf` stays on: dropping it then takes only those, and leaves the upper part as
   * the worker's oldest leaf, with the same recency. Nothing when the node has no more than that.
   */
  private splitOffTail(leaf: Claim, excess: number): void {
    const node = leaf.node;
    const label = node.label;
    let keep = label.length - excess;
    if (keep > 0 && isLow(label.charCodeAt(keep)) && isHigh(label.charCodeAt(keep - 1))) keep--;
    if (keep > 0) this.forest.split(node.parent!, node, keep);
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
    for (const [model, root] of this.forest.roots) {
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
          chars.set(worker.id, chars.get(worker.id)! + charsOf(node));
        }
      }
    }
    if (nodes !== this.forest.nodeCount) throw new Error("node count wrong");
    for (const worker of this.workers.values()) {
      if (chars.get(worker.id) !== worker.chars) throw new Error("worker char count wrong");
    }
    return chars;
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
