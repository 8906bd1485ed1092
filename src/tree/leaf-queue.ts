/**
 * What the queue needs of an entry: its access time and the links the queue keeps in it. A tree
 * node (node.ts) for one worker's tree; a worker's claim on a shared node (index/claim.ts).
 */
export interface Queued<T> {
  access: number;
  prev: T | null;
  next: T | null;
  heapIndex: number;
}

/**
 * A tree's leaves (or one worker's leaf claims in the shared index) in eviction order (least
 * recently accessed first), kept up to date on every insert so that evicting k leaves costs
 * O(k log h), never a walk over the whole tree.
 *
 * Two parts: a doubly linked recency list and a small binary heap.
 * - A node that becomes a leaf during an insert (a new leaf, or an existing leaf the insert ends
 *   at) gets the newest access time, so appending it to the list's tail keeps the list sorted:
 *   O(1) on the hot path.
 * - A parent left childless by an eviction becomes a leaf with an OLDER access time (its own last
 *   access), which cannot be appended; it goes into the heap instead.
 * The oldest leaf is the older of the list's head and the heap's top.
 *
 * Not lru-cache or a generic LRU library: those evict whole keys, while here the entries are tree
 * nodes whose leaf status changes under eviction (a parent becomes a leaf) and whose links live
 * inside the nodes, with no per-entry allocation on the hot path.
 */
export class LeafQueue<T extends Queued<T>> {
  /** Sentinel of the circular list: sentinel.next is the oldest, sentinel.prev the newest. */
  private readonly sentinel: T;
  private listSize = 0;
  /** Heap keys (access times) apart from the nodes, so sifting compares one contiguous array. */
  private keys: number[] = [];
  private nodes: T[] = [];

  constructor(sentinel: T) {
    sentinel.prev = sentinel;
    sentinel.next = sentinel;
    this.sentinel = sentinel;
  }

  get size(): number {
    return this.listSize + this.nodes.length;
  }

  /** Adds a leaf whose access time is the newest of all (it was just set by an insert). */
  append(node: T): void {
    const tail = this.sentinel.prev!;
    node.prev = tail;
    node.next = this.sentinel;
    tail.next = node;
    this.sentinel.prev = node;
    this.listSize++;
  }

  /** Adds a leaf with an older access time (a parent whose last child was just evicted). */
  promote(node: T): void {
    const i = this.nodes.length;
    this.keys.push(node.access);
    this.nodes.push(node);
    node.heapIndex = i;
    this.up(i);
  }

  /** Removes a node from wherever it is queued (a no-op for a node that is not queued). */
  detach(node: T): void {
    if (node.heapIndex >= 0) {
      this.removeAt(node.heapIndex);
      return;
    }
    const prev = node.prev;
    const next = node.next;
    if (prev === null || next === null) return;
    prev.next = next;
    next.prev = prev;
    node.prev = null;
    node.next = null;
    this.listSize--;
  }

  /** Removes and returns the least recently accessed leaf. */
  popOldest(): T | undefined {
    const head = this.sentinel.next!;
    const fromList = head !== this.sentinel;
    if (this.nodes.length > 0 && (!fromList || this.keys[0]! < head.access)) {
      const top = this.nodes[0]!;
      this.removeAt(0);
      return top;
    }
    if (!fromList) return undefined;
    this.detach(head);
    return head;
  }

  clear(): void {
    this.sentinel.prev = this.sentinel;
    this.sentinel.next = this.sentinel;
    this.listSize = 0;
    this.keys = [];
    this.nodes = [];
  }

  /**
   * For tests: throws unless the list is sorted by access, the heap is a heap, and every queued
   * node's links agree with where it is. Returns the queued nodes.
   */
  check(): Set<T> {
    const queued = new Set<T>();
    let last = Number.NEGATIVE_INFINITY;
    for (let n = this.sentinel.next!; n !== this.sentinel; n = n.next!) {
      if (n.next!.prev !== n || n.heapIndex !== -1) throw new Error("leaf list links broken");
      if (n.access < last) throw new Error("leaf list not in access order");
      last = n.access;
      queued.add(n);
    }
    if (queued.size !== this.listSize) throw new Error("leaf list size wrong");
    this.nodes.forEach((n, i) => {
      if (n.heapIndex !== i || n.prev !== null || this.keys[i] !== n.access) {
        throw new Error("leaf heap slot broken");
      }
      if (i > 0 && this.keys[(i - 1) >>> 1]! > this.keys[i]!) throw new Error("leaf heap order");
      queued.add(n);
    });
    if (queued.size !== this.size) throw new Error("node queued twice");
    return queued;
  }

  private removeAt(i: number): void {
    const keys = this.keys;
    const nodes = this.nodes;
    nodes[i]!.heapIndex = -1;
    const lastKey = keys.pop()!;
    const last = nodes.pop()!;
    if (i === nodes.length) return;
    keys[i] = lastKey;
    nodes[i] = last;
    last.heapIndex = i;
    this.down(i);
    this.up(last.heapIndex);
  }

  private up(start: number): void {
    const keys = this.keys;
    const nodes = this.nodes;
    const key = keys[start]!;
    const node = nodes[start]!;
    let i = start;
    while (i > 0) {
      const p = (i - 1) >>> 1;
      const parentKey = keys[p]!;
      if (parentKey <= key) break;
      keys[i] = parentKey;
      const moved = nodes[p]!;
      nodes[i] = moved;
      moved.heapIndex = i;
      i = p;
    }
    keys[i] = key;
    nodes[i] = node;
    node.heapIndex = i;
  }

  private down(start: number): void {
    const keys = this.keys;
    const nodes = this.nodes;
    const n = keys.length;
    const key = keys[start]!;
    const node = nodes[start]!;
    let i = start;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      const r = c + 1;
      if (r < n && keys[r]! < keys[c]!) c = r;
      const childKey = keys[c]!;
      if (childKey >= key) break;
      keys[i] = childKey;
      const moved = nodes[c]!;
      nodes[i] = moved;
      moved.heapIndex = i;
      i = c;
    }
    keys[i] = key;
    nodes[i] = node;
    node.heapIndex = i;
  }
}
