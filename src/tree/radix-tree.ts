/**
 * Character radix tree for ONE worker: which prompt prefixes were probably sent there.
 *
 * The tree is a trie over code points stored as UTF-16 edge labels: no node boundary ever falls
 * between a high surrogate and the low surrogate that follows it in an inserted string, so a
 * surrogate pair is never split and `match` never counts half of one. A lone surrogate counts as
 * its own code point.
 *
 * Recency is a logical clock (one tick per insert), never wall time, so eviction order is
 * deterministic. Inserting refreshes every node on the path; `match` is pure. Eviction removes
 * least-recently-used leaves, taken from a queue kept in order as inserts happen (leaf-queue.ts).
 */

import {
  checkHighWaterRatio,
  checkPositiveInteger,
  DEFAULT_HIGH_WATER_RATIO,
  DEFAULT_MAX_CHARS,
  highWaterMark,
} from "./char-budget.js";
import {
  addChild,
  childOf,
  isLeaf,
  pushChildren,
  removeChild,
  replaceChild,
} from "./child-container.js";
import { edgeMatch, isHigh, isLow, keyAt, ownCopy } from "./edge-match.js";
import { type AgedLeaf, newestLeafPaths } from "./leaf-paths.js";
import { LeafQueue } from "./leaf-queue.js";
import { TreeNode } from "./node.js";

export interface RadixTreeOptions {
  /** Budget in characters (UTF-16 code units) held by this tree. Default 67108864 (2^26). Must be a positive integer. */
  maxChars?: number;
  /** Reactive eviction: when an insert pushes charCount above maxChars * highWaterRatio, evict down to maxChars at once. Default 1.1. Must be >= 1. */
  highWaterRatio?: number;
  /** Called with the number of characters evicted, after every eviction that removed something (timer or reactive). */
  onEvict?: (evictedChars: number) => void;
  /** Eviction trims the oldest leaf from its end, only as far as needed, instead of dropping it whole (see `evict`). Default false. */
  evictTailFirst?: boolean;
}

export class RadixTree {
  private budget: number;
  private ratio: number;
  private highWater: number;
  private readonly onEvict: ((evictedChars: number) => void) | undefined;
  private tailFirst: boolean;
  private readonly root = new TreeNode("", -1, null, 0);
  private readonly leaves = new LeafQueue<TreeNode>(new TreeNode("", -1, null, 0));
  private clock = 0;
  private chars = 0;
  private nodes = 0;

  /** Throws a RangeError naming the option when an option is invalid. */
  constructor(options?: RadixTreeOptions) {
    if (options !== undefined && (typeof options !== "object" || options === null)) {
      throw new RangeError("RadixTree options must be an object");
    }
    const maxChars = checkPositiveInteger(
      "RadixTree",
      "maxChars",
      options?.maxChars ?? DEFAULT_MAX_CHARS,
    );
    const ratio = checkHighWaterRatio(
      "RadixTree",
      options?.highWaterRatio ?? DEFAULT_HIGH_WATER_RATIO,
    );
    const onEvict = options?.onEvict;
    if (onEvict !== undefined && typeof onEvict !== "function") {
      throw new RangeError("RadixTree onEvict must be a function");
    }
    this.budget = maxChars;
    this.ratio = ratio;
    this.highWater = highWaterMark(maxChars, ratio);
    this.onEvict = onEvict;
    this.tailFirst = options?.evictTailFirst === true;
  }

  /** Whether eviction trims the oldest leaf from its end (see `evict`). */
  get evictTailFirst(): boolean {
    return this.tailFirst;
  }

  set evictTailFirst(on: boolean) {
    this.tailFirst = on;
  }

  /** Inserts evict only once charCount passes maxChars x this (1 = never above maxChars). */
  get highWaterRatio(): number {
    return this.ratio;
  }

  /** Budget in characters: eviction brings charCount back to at most this. */
  get maxChars(): number {
    return this.budget;
  }

  /**
   * Changes the budget (a worker's learned KV capacity changed) and evicts down to it at once when
   * the tree holds more; `highWaterRatio` (default: unchanged) sets the slack allowed on insert.
   * Throws a RangeError unless a positive integer (and a ratio >= 1).
   */
  setMaxChars(maxChars: number, highWaterRatio: number = this.ratio): number {
    checkPositiveInteger("RadixTree", "maxChars", maxChars);
    checkHighWaterRatio("RadixTree", highWaterRatio);
    this.budget = maxChars;
    this.ratio = highWaterRatio;
    this.highWater = highWaterMark(maxChars, highWaterRatio);
    return this.chars > maxChars ? this.evict(maxChars) : 0;
  }

  /** Characters held: the sum of all edge label lengths. */
  get charCount(): number {
    return this.chars;
  }

  /** Nodes held, not counting the root. */
  get nodeCount(): number {
    return this.nodes;
  }

  /**
   * Records `text` (a no-op when empty), refreshes the recency of every node on its path, and
   * evicts down to maxChars at once if the tree grew past the high-water mark.
   */
  insert(text: string): void {
    const n = text.length;
    if (n === 0) return;
    const now = ++this.clock;
    const root = this.root;
    let node = root;
    let pos = 0;
    for (;;) {
      if (pos === n) {
        // Ended exactly at an existing node: a leaf there is now the newest leaf.
        if (node !== root && isLeaf(node)) {
          this.leaves.detach(node);
          this.leaves.append(node);
        }
        break;
      }
      const key = keyAt(text, pos);
      const child = childOf(node, key);
      if (child === undefined) {
        if (node !== root && isLeaf(node)) this.leaves.detach(node); // about to get a child
        const leaf = new TreeNode(ownCopy(text.slice(pos)), key, node, now);
        addChild(node, leaf);
        this.leaves.append(leaf);
        this.chars += n - pos;
        this.nodes++;
        break;
      }
      const label = child.label;
      const k = edgeMatch(text, pos, label);
      if (k === label.length) {
        child.access = now;
        node = child;
        pos += k;
        continue;
      }
      // Diverged inside the edge (k >= 1: the first code points are equal): split it at k. The
      // lower half keeps its node (and its place in the leaf queue, with its older access).
      const mid = new TreeNode(ownCopy(label.slice(0, k)), key, node, now);
      const tail = ownCopy(label.slice(k));
      child.label = tail;
      child.key = keyAt(tail, 0);
      child.parent = mid;
      mid.kids = [child];
      replaceChild(node, child, mid);
      this.nodes++;
      node = mid;
      pos += k;
    }
    if (this.chars > this.highWater) this.evict(this.maxChars);
  }

  /**
   * How many leading code units of `text` this tree holds: the longest common prefix with anything
   * inserted (and not evicted), in whole code points. Pure: does not touch recency.
   */
  match(text: string): number {
    const n = text.length;
    let node = this.root;
    let pos = 0;
    while (pos < n) {
      const child = childOf(node, keyAt(text, pos));
      if (child === undefined) break;
      const label = child.label;
      const k = edgeMatch(text, pos, label);
      pos += k;
      if (k !== label.length) break;
      node = child;
    }
    return pos;
  }

  /**
   * Forgets what this tree holds of `text` beyond its first `keep` characters, and everything that
   * extends it: afterwards match(text) <= keep, and every held string that shared more than `keep`
   * characters with `text` is cut to those `keep` characters (a prefix cache is prefix-closed: an
   * engine that lost a prefix lost whatever extended it). `keep` is rounded down to a code point
   * boundary. Not reported to onEvict (nothing was evicted for lack of room). Returns the
   * characters removed.
   */
  truncate(text: string, keep: number): number {
    if (typeof keep !== "number" || Number.isNaN(keep) || keep < 0) {
      throw new RangeError(`RadixTree truncate keep must be a number >= 0, got ${String(keep)}`);
    }
    const n = text.length;
    let cut = Math.floor(keep);
    if (cut >= n) return 0;
    if (cut > 0 && isLow(text.charCodeAt(cut)) && isHigh(text.charCodeAt(cut - 1))) cut--;
    const root = this.root;
    let node = root;
    let pos = 0;
    while (pos < n) {
      const child = childOf(node, keyAt(text, pos));
      if (child === undefined) return 0;
      const label = child.label;
      const k = edgeMatch(text, pos, label);
      if (pos + k <= cut) {
        // Everything this edge shares with text is within what is kept.
        if (k !== label.length) return 0;
        node = child;
        pos += k;
        continue;
      }
      if (pos === cut) {
        // The whole edge (and its subtree) lies beyond the cut.
        const removed = this.dropSubtree(child, true);
        removeChild(node, child);
        child.parent = null;
        if (node !== root && isLeaf(node)) this.leaves.promote(node);
        return removed;
      }
      // The cut falls inside this edge: keep its head, drop its tail and everything below.
      let removed = this.dropSubtree(child, false);
      const head = cut - pos;
      removed += label.length - head;
      this.chars -= label.length - head;
      child.label = ownCopy(label.slice(0, head));
      if (child.kids !== null || child.map !== null) {
        child.kids = null;
        child.map = null;
        this.leaves.promote(child);
      }
      return removed;
    }
    return 0;
  }

  /**
   * Unqueues and uncounts the descendants of `top` (and `top` itself when `withTop`); returns their
   * characters. The caller unlinks `top` or its children.
   */
  private dropSubtree(top: TreeNode, withTop: boolean): number {
    let removed = 0;
    const stack: TreeNode[] = [];
    if (withTop) stack.push(top);
    else pushChildren(top, stack);
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      if (isLeaf(node)) this.leaves.detach(node);
      else pushChildren(node, stack);
      removed += node.label.length;
      this.nodes--;
    }
    this.chars -= removed;
    return removed;
  }

  /**
   * Removes least-recently-used leaves until charCount <= targetChars (default maxChars); a parent
   * left childless becomes a leaf with its own recency. Returns the characters evicted. Costs
   * O(k log h) for k leaves evicted (h: parents made leaves by earlier evictions), whatever the
   * tree's size.
   */
  evict(targetChars: number = this.maxChars): number {
    if (typeof targetChars !== "number" || Number.isNaN(targetChars) || targetChars < 0) {
      throw new RangeError(
        `RadixTree evict target must be a number >= 0, got ${String(targetChars)}`,
      );
    }
    const root = this.root;
    let evicted = 0;
    while (this.chars > targetChars) {
      const leaf = this.leaves.popOldest();
      if (leaf === undefined) break;
      const trimmed = this.tailFirst ? this.trimTail(leaf, this.chars - targetChars) : 0;
      if (trimmed > 0) {
        evicted += trimmed;
        break;
      }
      const parent = leaf.parent!;
      removeChild(parent, leaf);
      leaf.parent = null;
      const len = leaf.label.length;
      this.chars -= len;
      this.nodes--;
      evicted += len;
      if (parent !== root && isLeaf(parent)) this.leaves.promote(parent);
    }
    if (evicted > 0 && this.onEvict !== undefined) this.onEvict(evicted);
    return evicted;
  }

  /**
   * Cuts `excess` characters (one more where the cut would split a surrogate pair) off the end of
   * `leaf`, just popped as the oldest, and queues it again with its own recency (still the
   * oldest). Returns the characters cut; 0, with nothing changed, when that would leave the leaf
   * empty: the caller drops it whole.
   */
  private trimTail(leaf: TreeNode, excess: number): number {
    const label = leaf.label;
    let keep = label.length - excess;
    if (keep > 0 && isLow(label.charCodeAt(keep)) && isHigh(label.charCodeAt(keep - 1))) keep--;
    if (keep <= 0) return 0;
    leaf.label = ownCopy(label.slice(0, keep));
    const cut = label.length - keep;
    this.chars -= cut;
    this.leaves.promote(leaf);
    return cut;
  }

  /** Drops everything (not reported to onEvict: nothing was evicted for lack of room). */
  /** The texts of its leaves, newest first, up to `maxChars` distinct characters (leaf-paths.ts). */
  leafPaths(maxChars: number = this.chars): string[] {
    const leaves: AgedLeaf<TreeNode>[] = [];
    const stack: TreeNode[] = [];
    pushChildren(this.root, stack);
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      if (isLeaf(node)) leaves.push({ node, access: node.access });
      else pushChildren(node, stack);
    }
    return newestLeafPaths(leaves, maxChars);
  }

  clear(): void {
    this.root.kids = null;
    this.root.map = null;
    this.leaves.clear();
    this.chars = 0;
    this.nodes = 0;
  }

  /**
   * Full traversal, for tests: must equal the incremental counters. Also checks the leaf queue
   * (exactly the leaves, in order) and throws an Error if it is inconsistent.
   */
  recount(): { chars: number; nodes: number } {
    const queued = this.leaves.check();
    let chars = 0;
    let nodes = 0;
    let leaves = 0;
    const stack: TreeNode[] = [];
    pushChildren(this.root, stack);
    for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
      chars += node.label.length;
      nodes++;
      if (isLeaf(node)) {
        leaves++;
        if (!queued.has(node)) throw new Error("RadixTree leaf missing from the leaf queue");
      }
      pushChildren(node, stack);
    }
    if (leaves !== queued.size) throw new Error("RadixTree leaf queue holds non-leaves");
    return { chars, nodes };
  }
}
