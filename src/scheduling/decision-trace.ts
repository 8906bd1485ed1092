import { createWriteStream } from "node:fs";
import { type PolicyWorker, queuedPrefillChars } from "./policy.js";

/**
 * The decision trace (--decision-trace): one JSON line per routing decision and one per outcome,
 * so that two runs whose hit rates differ can be compared decision by decision offline
 * (scripts/decision-trace.ts explains a trace, or where two traces part).
 *
 *   {"k":"d","n":seq,"t":ms,"h":"hash","len":chars,"m":model,"c":[[id,held,fill,inFlight,pending,cost],...],"w":id,"b":branch}
 *   {"k":"o","n":seq,"p":promptTokens,"c":cachedTokens}
 *
 * A decision line that lists a worker for the first time also carries `"u":{id:url,...}`: ids are
 * hashes of URLs, so two runs on other ports are matched by their workers' order of appearance,
 * and runs on the same URLs by URL (bench/lib/decision-trace-explain.ts).
 *
 * `pending` is the uncached prefill queued there, this router's and its peers' (what prefix_cost
 * weighs). `h` is a hash of the routing text, never the text: the trace holds no prompt. `cost` is the
 * policy's per-worker cost when it has one (prefix_cost), else null. Bounded: after `maxRecords`
 * lines, or while the sink reports more than its byte budget unwritten, lines are dropped and
 * counted (`dropped`), never queued.
 */
export interface TraceSink {
  /** Writes one line; returns false when the line was not taken (the sink is backed up). */
  write(line: string): boolean;
}

export interface TracedCandidate {
  readonly worker: PolicyWorker;
  readonly held: number;
  readonly fill: number;
  readonly cost: number | null;
  /** The worker's URL, for the trace's "w" line (policies never see it; the scheduler has it). */
  readonly url?: string | undefined;
}

export class DecisionTrace {
  private records = 0;
  private seq = 0;
  /** Workers whose URL a decision line carried ("u"). */
  private readonly named = new Set<string>();
  dropped = 0;

  constructor(
    private readonly sink: TraceSink,
    private readonly maxRecords = 1_000_000,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Records a decision; returns its sequence number (for `outcome`), or -1 when dropped. */
  decided(
    text: string,
    model: string | undefined,
    candidates: readonly TracedCandidate[],
    chosen: string,
    branch: string,
  ): number {
    let urls: Record<string, string | null> | undefined;
    for (const { worker, url } of candidates) {
      if (this.named.has(worker.id)) continue;
      urls ??= {};
      urls[worker.id] = url ?? null;
    }
    const n = ++this.seq;
    const c = candidates.map((x) => [
      x.worker.id,
      x.held,
      round(x.fill),
      x.worker.inFlight,
      queuedPrefillChars(x.worker),
      x.cost === null || !Number.isFinite(x.cost) ? null : Math.round(x.cost),
    ]);
    const line = JSON.stringify({
      k: "d",
      n,
      t: this.clock(),
      h: textHash(text),
      len: text.length,
      m: model ?? null,
      c,
      w: chosen,
      b: branch,
      ...(urls === undefined ? {} : { u: urls }),
    });
    if (!this.put(line)) return -1;
    if (urls !== undefined) for (const id of Object.keys(urls)) this.named.add(id);
    return n;
  }

  /** What the engine reported for decision `n`: its prompt and cached tokens. */
  outcome(n: number, promptTokens: number, cachedTokens: number): void {
    if (n < 0) return;
    this.put(JSON.stringify({ k: "o", n, p: promptTokens, c: cachedTokens }));
  }

  private put(line: string): boolean {
    if (this.records >= this.maxRecords || !this.sink.write(`${line}\n`)) {
      this.dropped++;
      return false;
    }
    this.records++;
    return true;
  }
}

const round = (x: number) => Math.round(x * 1000) / 1000;

/** FNV-1a over the text's UTF-16 units, as 8 hex digits: equal texts, equal hashes across runs. */
export function textHash(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0).toString(16).padStart(8, "0");
}

/** Unwritten bytes above which a file trace drops lines instead of queueing them. */
export const TRACE_BACKLOG_BYTES = 8 * 2 ** 20;

/**
 * A trace appended to `path` (--decision-trace); `close` flushes it. A disk slower than the
 * decisions drops lines (DecisionTrace.dropped) rather than growing the write queue.
 */
export function fileDecisionTrace(path: string): { trace: DecisionTrace; close(): Promise<void> } {
  const stream = createWriteStream(path, { flags: "a" });
  // A write error (disk full, a path gone) ends the trace, never the router.
  let failed = false;
  stream.on("error", () => {
    failed = true;
  });
  const trace = new DecisionTrace({
    write: (line) => {
      if (failed || stream.writableLength > TRACE_BACKLOG_BYTES) return false;
      stream.write(line);
      return true;
    },
  });
  return {
    trace,
    close: () =>
      new Promise<void>((resolve) => {
        if (failed) return resolve();
        stream.end(() => resolve());
      }),
  };
}
