/**
 * A node of the shared index's tree (shared-index.ts) and the workers' claims on it.
 *
 * The tree is the union of what every worker was sent; a claim says "this worker probably holds
 * this node's label (and, the index being prefix-closed, every ancestor's)". Each claim carries
 * the recency and leaf-queue links of that worker's LRU, so one worker's eviction removes its own
 * claim and leaves the node to the others.
 */

/** Per-worker state the claims point at (owned by shared-index.ts). */
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

export class SharedNode {
  /** Edge label from the parent, a flat string (see ownCopy in tree/radix-tree.ts). */
  label: string;
  /** First code point of `label` (the key under which the parent holds this node). */
  key: number;
  parent: SharedNode | null;
  /** Children while there are at most MAX_ARRAY_CHILDREN of them; null when none or in `map`. */
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

// Child lookup as in tree/radix-tree.ts, kept apart so that each tree's code sees one node shape.

/** Above this many children a node switches from a scanned array to a Map keyed by code point. */
const MAX_ARRAY_CHILDREN = 8;

export function childOf(node: SharedNode, key: number): SharedNode | undefined {
  const kids = node.kids;
  if (kids !== null) {
    for (let i = 0; i < kids.length; i++) {
      const kid = kids[i]!;
      if (kid.key === key) return kid;
    }
    return undefined;
  }
  const map = node.map;
  return map === null ? undefined : map.get(key);
}

export function addChild(node: SharedNode, child: SharedNode): void {
  const map = node.map;
  if (map !== null) {
    map.set(child.key, child);
    return;
  }
  const kids = node.kids;
  if (kids === null) {
    node.kids = [child];
  } else if (kids.length < MAX_ARRAY_CHILDREN) {
    kids.push(child);
  } else {
    const m = new Map<number, SharedNode>();
    for (const kid of kids) m.set(kid.key, kid);
    m.set(child.key, child);
    node.map = m;
    node.kids = null;
  }
}

/** Puts `next` where `prev` was among `node`'s children (both have the same key). */
export function replaceChild(node: SharedNode, prev: SharedNode, next: SharedNode): void {
  const kids = node.kids;
  if (kids !== null) kids[kids.indexOf(prev)] = next;
  else node.map!.set(next.key, next);
}

export function removeChild(node: SharedNode, child: SharedNode): void {
  const kids = node.kids;
  if (kids !== null) {
    const last = kids.pop()!;
    if (last !== child) kids[kids.indexOf(child)] = last;
    if (kids.length === 0) node.kids = null;
    return;
  }
  const map = node.map!;
  map.delete(child.key);
  if (map.size === 0) node.map = null;
}

export function isLeaf(node: SharedNode): boolean {
  return node.kids === null && node.map === null;
}

export function childrenOf(node: SharedNode): Iterable<SharedNode> {
  if (node.kids !== null) return node.kids;
  if (node.map !== null) return node.map.values();
  return [];
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
