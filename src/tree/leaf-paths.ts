/**
 * A tree's content as the texts of its leaves, newest first, for a snapshot of the prefix index
 * (state/snapshot.ts): inserting them again, oldest first, rebuilds the same tree with the same
 * eviction order. Bounded: leaves are taken newest first until the distinct characters they add
 * (each node counted once, however many leaves share it) would pass `maxChars`.
 */

/** What a path walk needs of a node: its edge label and its parent (null for the root). */
export interface PathNode {
  readonly label: string;
  readonly parent: PathNode | null;
}

/** A leaf and the logical time of its last insert. */
export interface AgedLeaf<N extends PathNode> {
  readonly node: N;
  readonly access: number;
}

export function newestLeafPaths<N extends PathNode>(
  leaves: AgedLeaf<N>[],
  maxChars: number,
): string[] {
  leaves.sort((a, b) => b.access - a.access);
  const seen = new Set<PathNode>();
  const out: string[] = [];
  let chars = 0;
  for (const { node } of leaves) {
    let added = 0;
    const fresh: PathNode[] = [];
    for (let n: PathNode | null = node; n?.parent != null && !seen.has(n); n = n.parent) {
      fresh.push(n);
      added += n.label.length;
    }
    if (chars + added > maxChars) break;
    chars += added;
    for (const n of fresh) seen.add(n);
    out.push(pathText(node));
  }
  return out;
}

/** The labels from under the root down to `node`, joined. */
function pathText(node: PathNode): string {
  const labels: string[] = [];
  for (let n: PathNode | null = node; n?.parent != null; n = n.parent) labels.push(n.label);
  labels.reverse();
  return labels.join("");
}
