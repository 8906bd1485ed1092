/**
 * Millisecond samples counted in fixed 0.1 ms buckets (everything above a minute in the last one):
 * bench:stream records a gap per relayed chunk, hundreds of thousands a run, in bounded memory and
 * without sorting.
 */
const BUCKET_MS = 0.1;
const BUCKETS = 600_000;

export interface MsQuantiles {
  count: number;
  p50: number;
  p99: number;
  max: number;
}

export class MsHistogram {
  private readonly counts = new Uint32Array(BUCKETS);
  private total = 0;
  private maxMs = 0;

  add(ms: number): void {
    const bucket = Math.min(BUCKETS - 1, Math.max(0, Math.floor(ms / BUCKET_MS)));
    this.counts[bucket]!++;
    this.total++;
    if (ms > this.maxMs) this.maxMs = ms;
  }

  /** Nearest-rank quantiles, each the middle of its bucket; NaN without samples. */
  summary(): MsQuantiles {
    return {
      count: this.total,
      p50: this.quantile(0.5),
      p99: this.quantile(0.99),
      max: this.total === 0 ? Number.NaN : this.maxMs,
    };
  }

  private quantile(q: number): number {
    if (this.total === 0) return Number.NaN;
    const rank = Math.max(1, Math.ceil(q * this.total));
    let seen = 0;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.counts[i]!;
      if (seen >= rank) return (i + 0.5) * BUCKET_MS;
    }
    return this.maxMs;
  }
}
