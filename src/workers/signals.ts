import type { EngineKind } from "../engines/engine-reading.js";

/** Queue and KV usage as the engine last reported them. */
export interface LoadSignals {
  readonly queued: number | undefined;
  readonly running: number | undefined;
  readonly kvUsage: number | undefined;
  /**
   * This router's own requests there still waiting for a first byte when the engine answered
   * (the larger count of the read's start and end: the engine's snapshot falls in between).
   * The engine's queue includes those; what it reports beyond them someone else sent.
   */
  readonly routerPending?: number | undefined;
}

/**
 * What the router has learned about one worker from its engine (src/workers/introspection.ts
 * fills it), each part with the time it was read. A part older than `staleAfterMs` is ignored:
 * `load()` and `capacity()` answer undefined, exactly as for a worker that exposes nothing.
 */
export class EngineSignals {
  /** Which engine answered, once known. */
  engine: EngineKind | undefined;
  /** Signals older than this are ignored (3 poll intervals; set by the poller). */
  staleAfterMs = Number.POSITIVE_INFINITY;

  private capacityTokens: number | undefined;
  private capacitySource: "get_server_info" | "metrics" | undefined;
  private capacityAt = 0;
  private lastLoad: LoadSignals | undefined;
  private loadAt = 0;
  /** Last time any endpoint answered something usable (epoch ms, 0 = never). */
  private seenAt = 0;

  recordCapacity(tokens: number, source: "get_server_info" | "metrics", now: number): void {
    this.capacityTokens = tokens;
    this.capacitySource = source;
    this.capacityAt = now;
    this.seenAt = now;
  }

  recordLoad(load: LoadSignals, now: number): void {
    this.lastLoad = load;
    this.loadAt = now;
    this.seenAt = now;
  }

  recordSeen(now: number): void {
    this.seenAt = now;
  }

  /** KV capacity in tokens, when fresh. */
  capacity(now = Date.now()): number | undefined {
    return this.fresh(this.capacityAt, now) ? this.capacityTokens : undefined;
  }

  /** The last capacity ever learned, fresh or not (the tree budget keeps it; see tree-budget.ts). */
  get lastCapacity(): number | undefined {
    return this.capacityTokens;
  }

  get capacityFrom(): "get_server_info" | "metrics" | undefined {
    return this.capacitySource;
  }

  /** Queue, running and KV usage, when fresh. */
  load(now = Date.now()): LoadSignals | undefined {
    return this.fresh(this.loadAt, now) ? this.lastLoad : undefined;
  }

  /** Seconds since the engine last answered anything usable; undefined when it never did. */
  ageSecs(now = Date.now()): number | undefined {
    return this.seenAt === 0 ? undefined : Math.max(0, now - this.seenAt) / 1000;
  }

  private fresh(at: number, now: number): boolean {
    return at > 0 && now - at <= this.staleAfterMs;
  }
}
