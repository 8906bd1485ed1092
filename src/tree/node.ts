import type { ChildContainer } from "./child-container.js";

/** One node of the radix tree (see radix-tree.ts for the operations on it). */
export class TreeNode implements ChildContainer<TreeNode> {
  /** Edge label from the parent; a flat string that owns its characters (see `ownCopy`). */
  label: string;
  /** First code point of `label` (the key under which the parent holds this node). */
  key: number;
  parent: TreeNode | null;
  /** Children (see child-container.ts). */
  kids: TreeNode[] | null = null;
  map: Map<number, TreeNode> | null = null;
  /** Logical time of the last insert whose path went through (or ended at) this node. */
  access: number;
  /** Links in the leaf queue's recency list (null when not in it); see leaf-queue.ts. */
  prev: TreeNode | null = null;
  next: TreeNode | null = null;
  /** Slot in the leaf queue's heap, or -1 when not in it. */
  heapIndex = -1;

  constructor(label: string, key: number, parent: TreeNode | null, access: number) {
    this.label = label;
    this.key = key;
    this.parent = parent;
    this.access = access;
  }
}
