/**
 * The bytes a process allocates on V8's heap, read from its --trace-gc lines: between two
 * collections it allocated what the heap held before the second minus what it kept after the
 * first. Unlike CPU time, the figure does not move with the machine's load (bench:overhead-ab
 * --alloc). A window's edges fall between collections, so it is exact to within one interval
 * between collections (a few MB): measure enough requests that this stays small.
 */

/** One collection of a --trace-gc line: heap MB before and after. */
export interface Collection {
  beforeMb: number;
  afterMb: number;
}

/**
 * "[pid:0x...]   1234 ms: Scavenge 5.1 (6.3) -> 4.3 (7.3) MB, ..." (also Mark-Compact and
 * the Minor Mark-Sweep of newer V8s); undefined for any other line.
 */
export function parseGcLine(line: string): Collection | undefined {
  const m = /ms: [A-Za-z-]+(?: \([^)]*\))? ([\d.]+) \([\d.]+\) -> ([\d.]+) \([\d.]+\) MB/.exec(
    line,
  );
  if (m === null) return undefined;
  return { beforeMb: Number(m[1]), afterMb: Number(m[2]) };
}

/** Collects a process's collections as its stdout lines come; `mark`/`since` bound a window. */
export class GcTrace {
  private readonly collections: Collection[] = [];

  readonly onLine = (line: string): void => {
    const c = parseGcLine(line);
    if (c !== undefined) this.collections.push(c);
  };

  /** A window's start: the collections seen so far. */
  mark(): number {
    return this.collections.length;
  }

  /** Bytes allocated between the collection before `mark` and the last one since. */
  allocatedSince(mark: number): { bytes: number; collections: number } {
    let mb = 0;
    for (let i = Math.max(mark, 1); i < this.collections.length; i++) {
      mb += this.collections[i]!.beforeMb - this.collections[i - 1]!.afterMb;
    }
    return { bytes: mb * 1024 * 1024, collections: this.collections.length - mark };
  }
}
