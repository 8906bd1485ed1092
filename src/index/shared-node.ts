/**
 * A node of the shared index's tree (shared-index.ts) and the workers' claims on it.
 *
 * The tree is the union of what every worker was sent; a claim says "this worker probably holds
 * this node's label (and, the index being prefix-closed, every ancestor's)". Each claim carries
 * the recency and leaf-queue links of that worker's LRU, so one worker's eviction removes its own
 * claim and leaves the node to the others.
 */

import type { ChildContainer } from "../tree/child-container.js";

/** Per-worker state the claims point at (shared-forest.ts: WorkerClaims). */
export interface ClaimOwner {
  /** Index into the per-slot scratch arrays used by match. */
  readonly slot: number;
}

export class Claim {
  /** Claims of the same worker on this node's children (0: a leaf of the worker's LRU). */
  children = 0;
  /** Links in the worker's leaf queue (null when not in it); see tree/leaf-queue.ts. */
  prev: Claim | null = null;
  next: Claim | null = null;
  heapIndex = -1;

  constructor(
    readonly owner: ClaimOwner,
    public node: SharedNode,
    /** The same worker's claim on the parent node; null under a root. */
    public up: Claim | null,
    /** Logical time of the worker's last insert through this node. */
    public access: number,
  ) {}
}

export class SharedNode implements ChildContainer<SharedNode> {
  /** Edge label from the parent, a flat string (see ownCopy in tree/edge-match.ts). */
  label: string;
  /** First code point of `label` (the key under which the parent holds this node). */
  key: number;
  parent: SharedNode | null;
  /** Children (see tree/child-container.ts). */
  kids: SharedNode[] | null = null;
  map: Map<number, SharedNode> | null = null;
  /** The workers holding this node; never empty for a node in the tree (roots have none). */
  claims: Claim[] = [];

  constructor(label: string, key: number, parent: SharedNode | null) {
    this.label = label;
    this.key = key;
    this.parent = parent;
  }
}

/** The owner's claim on `node`, if any. */
export function claimOf(node: SharedNode, owner: ClaimOwner): Claim | undefined {
  const claims = node.claims;
  for (let i = 0; i < claims.length; i++) {
    const claim = claims[i]!;
    if (claim.owner === owner) return claim;
  }
  return undefined;
}
