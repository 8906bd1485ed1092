/**
 * The shared index's trees (shared-index.ts) and the surgery on them: a worker's claim made on a
 * node, an edge split with every claim copied, a claim dropped (and its node with it when no one
 * else claims it), a worker's subtree dropped. Each worker's characters and leaf queue of claims
 * (WorkerClaims) change here, together with the tree, so they always agree (SharedIndex.check).
 */
import { childrenOf, isLeaf, removeChild, replaceChild } from "../tree/child-container.js";
import { keyAt, ownCopy } from "../tree/edge-match.js";
import { LeafQueue } from "../tree/leaf-queue.js";
import type { EvictionUnit } from "./prefix-index.js";
import { Claim, type ClaimOwner, claimOf, SharedNode } from "./shared-node.js";

/** What a worker's part asks of its index: its high-water mark and one slice of eviction. */
export interface WorkerEviction {
  highWaterOf(budget: number): number;
  evictSlice(worker: WorkerClaims, target: number, toHighWater: boolean): number;
}

/** One worker's part of the index: its budget, its characters and its LRU of leaf claims. */
export class WorkerClaims implements ClaimOwner, EvictionUnit {
  budget: number;
  highWater: number;
  chars = 0;
  /**
   * The budget set from the engine's capacity (PrefixIndex.setBudget), undefined until then: fill
   * means something once set. `budget` is it less `reserve` (PrefixIndex.reserve).
   */
  learned: number | undefined = undefined;
  reserve = 0;
  readonly leaves: LeafQueue<Claim>;

  constructor(
    readonly id: string,
    readonly slot: number,
    budget: number,
    private readonly index: WorkerEviction,
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
 * What a claim on `node` costs its worker: its label, and for a node right under a root the
 * root's label too (the model key; an adapter name or a tenant's salt is the client's to choose,
 * so it must count in the budget like the text). A split moves that share to the new upper
 * node, which takes the old node's place under the root, so every worker's total stays the same.
 */
export function charsOf(node: SharedNode): number {
  const parent = node.parent;
  return parent !== null && parent.parent === null
    ? node.label.length + parent.label.length
    : node.label.length;
}

/** One tree per model ("" for none), with the node count; a root whose tree empties is dropped. */
export class SharedForest {
  readonly roots = new Map<string, SharedNode>();
  /** Nodes in all trees (roots not counted). */
  nodeCount = 0;

  /** The model's root, made when `create` and the model has none yet. */
  root(model: string | undefined, create: boolean): SharedNode | undefined {
    const modelKey = model ?? "";
    let root = this.roots.get(modelKey);
    if (root === undefined && create) {
      // A root's label names its model (roots are never matched as edges).
      root = new SharedNode(modelKey, -1, null);
      this.roots.set(modelKey, root);
    }
    return root;
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

  /** The worker's claim on `node`, made (and counted) if it had none; refreshes its recency. */
  claim(worker: WorkerClaims, node: SharedNode, up: Claim | null, now: number): Claim {
    const found = claimOf(node, worker);
    if (found !== undefined) {
      found.access = now;
      return found;
    }
    const claim = new Claim(worker, node, up, now);
    node.claims.push(claim);
    worker.chars += charsOf(node);
    // The parent's claim stops being a leaf of the worker's LRU.
    if (up !== null && up.children++ === 0) worker.leaves.detach(up);
    return claim;
  }

  /**
   * Splits `child` (under `parent`) after its first `k` code units; returns the new upper node.
   * Every claim on the child is copied onto the upper node with the same recency, so each
   * worker's characters and leaves stay what they were.
   */
  split(parent: SharedNode, child: SharedNode, k: number): SharedNode {
    const label = child.label;
    const upper = new SharedNode(ownCopy(label.slice(0, k)), child.key, parent);
    const tail = ownCopy(label.slice(k));
    child.label = tail;
    child.key = keyAt(tail, 0);
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
    this.nodeCount++;
    return upper;
  }

  /**
   * Removes one claim that has no claims of its worker below it; its parent claim becomes a leaf
   * when this was its last child, and the node goes when no one claims it. Returns its characters.
   */
  dropClaim(claim: Claim): number {
    const worker = claim.owner as WorkerClaims;
    const node = claim.node;
    worker.leaves.detach(claim);
    const claims = node.claims;
    const last = claims.pop()!;
    if (last !== claim) claims[claims.indexOf(claim)] = last;
    const len = charsOf(node);
    worker.chars -= len;
    const up = claim.up;
    if (up !== null && --up.children === 0) worker.leaves.promote(up);
    if (claims.length === 0) {
      // No one else holds it, hence no one holds anything below it either: it is a leaf.
      const parent = node.parent!;
      removeChild(parent, node);
      node.parent = null;
      this.nodeCount--;
      if (parent.parent === null && isLeaf(parent)) this.roots.delete(parent.label);
    }
    return len;
  }

  /** Drops `top` and every claim of the same worker below it; returns the characters dropped. */
  dropSubtree(top: Claim): number {
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
}
