/**
 * The children of a radix-tree node, keyed by the first code point of their label: a small array
 * scanned linearly while there are few (the common case, cheaper than a Map), a Map beyond that.
 *
 * Shared by the per-worker tree (tree/node.ts) and the shared index's tree (index/shared-node.ts).
 * Each process normally runs one of the two, so these call sites stay monomorphic in production;
 * where both run (bench:tree's index part) they see two node shapes, which V8 still inlines.
 */

/** The fields a node needs to hold children; `kids` and `map` are never both non-null. */
export interface ChildContainer<N> {
  /** First code point of the node's label (the key under which its parent holds it). */
  key: number;
  /** Children while there are at most MAX_ARRAY_CHILDREN of them; null when none or in `map`. */
  kids: N[] | null;
  map: Map<number, N> | null;
}

/** Above this many children a node switches from a scanned array to a Map keyed by code point. */
const MAX_ARRAY_CHILDREN = 8;

export function isLeaf<N extends ChildContainer<N>>(node: N): boolean {
  return node.kids === null && node.map === null;
}

export function childOf<N extends ChildContainer<N>>(node: N, key: number): N | undefined {
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

export function addChild<N extends ChildContainer<N>>(node: N, child: N): void {
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
    const m = new Map<number, N>();
    for (const kid of kids) m.set(kid.key, kid);
    m.set(child.key, child);
    node.map = m;
    node.kids = null;
  }
}

/** Puts `next` where `prev` was among `node`'s children (both have the same key). */
export function replaceChild<N extends ChildContainer<N>>(node: N, prev: N, next: N): void {
  const kids = node.kids;
  if (kids !== null) kids[kids.indexOf(prev)] = next;
  else node.map!.set(next.key, next);
}

export function removeChild<N extends ChildContainer<N>>(node: N, child: N): void {
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

export function childrenOf<N extends ChildContainer<N>>(node: N): Iterable<N> {
  if (node.kids !== null) return node.kids;
  if (node.map !== null) return node.map.values();
  return [];
}

/** Appends `node`'s children to `out` (an explicit stack, for walks without recursion). */
export function pushChildren<N extends ChildContainer<N>>(node: N, out: N[]): void {
  if (node.kids !== null) for (const kid of node.kids) out.push(kid);
  else if (node.map !== null) for (const kid of node.map.values()) out.push(kid);
}
