import {
  Counter,
  type CounterConfiguration,
  Histogram,
  type HistogramConfiguration,
  type LabelValues,
} from "prom-client";

/**
 * The metrics every request updates, counted in plain numbers and shown through prom-client when
 * read. Why: prom-client checks and hashes the labels on every inc and observe (0.3-1 µs each on
 * this machine; seven per JSON request, several percent of the router's CPU per request, issue
 * 21). Here a request joins its label values into a key and adds to numbers; the series, their
 * names and the exposition are prom-client's own (a counter is handed its sums when read; a
 * histogram answers with the samples prom-client's Histogram would show, test/metric-tally.test.ts).
 */

/** `shown`: the counter has the series (an inc of 0 makes one too, as in prom-client). */
type Entry<L extends string> = { labels: LabelValues<L>; value: number; shown: boolean };

/** Label values joined in the label names' order: one string per series. */
function seriesKey<L extends string>(names: readonly L[], labels: LabelValues<L>): string {
  if (names.length === 1) return String(labels[names[0]!]);
  let key = "";
  for (const name of names) key += `${labels[name]}\u0000`;
  return key;
}

/** A prom-client Counter whose increments are summed here and added to it when it is read. */
export class TalliedCounter<L extends string> {
  readonly counter: Counter<L>;
  private readonly names: readonly L[];
  private readonly pending = new Map<string, Entry<L>>();

  constructor(config: CounterConfiguration<L>) {
    this.names = [...(config.labelNames ?? [])];
    const flush = () => this.flush();
    this.counter = new Counter({ ...config, collect: flush });
  }

  /** Adds `value` (default 1) to the series; a negative or non-finite value is ignored. */
  inc(labels: LabelValues<L>, value = 1): void {
    if (!(value >= 0 && value < Number.POSITIVE_INFINITY)) return;
    const key = seriesKey(this.names, labels);
    let entry = this.pending.get(key);
    if (entry === undefined) {
      entry = { labels: { ...labels }, value: 0, shown: false };
      this.pending.set(key, entry);
    }
    entry.value += value;
  }

  /** The counter as prom-client reads it (sums added first). */
  get(): ReturnType<Counter<L>["get"]> {
    return this.counter.get();
  }

  private flush(): void {
    for (const entry of this.pending.values()) {
      if (entry.value === 0 && entry.shown) continue;
      this.counter.inc(entry.labels, entry.value);
      entry.value = 0;
      entry.shown = true;
    }
  }
}

type Series<L extends string> = {
  labels: LabelValues<L>;
  /** Observations per bucket (not cumulative), the last one past every bound (+Inf). */
  counts: number[];
  sum: number;
  count: number;
};

/**
 * A histogram whose observations are counted here: `observe` finds the bucket and adds. What
 * prom-client registers and reads is `histogram`, a Histogram that answers with the samples
 * prom-client's own would show (extractBucketValuesForExport in its histogram.js: cumulative
 * buckets, +Inf, _sum, _count per series).
 */
export class TalliedHistogram<L extends string = never> {
  /** The registered metric (named, read and reset like any Histogram). */
  readonly histogram: Histogram<L>;
  private readonly name: string;
  /** The bucket bounds, ascending (prom-client's own order). */
  private readonly bounds: readonly number[];
  private readonly names: readonly L[];
  private readonly series = new Map<string, Series<L>>();

  constructor(config: HistogramConfiguration<L> & { buckets: readonly number[] }) {
    this.name = config.name;
    this.bounds = [...config.buckets];
    this.names = [...(config.labelNames ?? [])];
    // Like prom-client, a histogram without labels shows its one series (zeros) from the start.
    if (this.names.length === 0) this.newSeries("", {} as LabelValues<L>);
    this.histogram = new SamplesView(
      { ...config, buckets: [...config.buckets] },
      () => this.samples(),
      () => this.reset(),
    );
  }

  /** Observes `value` in the series of `labels` (or the one series without labels). */
  observe(value: number): void;
  observe(labels: LabelValues<L>, value: number): void;
  observe(labels: LabelValues<L> | number, value?: number): void {
    const withLabels = typeof labels === "object";
    const v = withLabels ? value : labels;
    // prom-client throws on a non-finite value; a metric never fails a request.
    if (v === undefined || !Number.isFinite(v)) return;
    const set = withLabels ? labels : ({} as LabelValues<L>);
    const key = this.names.length === 0 ? "" : seriesKey(this.names, set);
    const series = this.series.get(key) ?? this.newSeries(key, set);
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && v > bounds[i]!) i++;
    series.counts[i]! += 1;
    series.sum += v;
    series.count += 1;
  }

  /** The histogram as prom-client reads it. */
  get(): ReturnType<Histogram<L>["get"]> {
    return this.histogram.get();
  }

  /** A registry reset: every series goes (prom-client's reset() too, even without labels). */
  private reset(): void {
    this.series.clear();
  }

  private newSeries(key: string, labels: LabelValues<L>): Series<L> {
    const series = {
      labels: { ...labels },
      counts: new Array<number>(this.bounds.length + 1).fill(0),
      sum: 0,
      count: 0,
    };
    this.series.set(key, series);
    return series;
  }

  /** The samples prom-client's text output reads (each with its series' labels as sharedLabels). */
  private samples(): Sample[] {
    const name = this.name;
    const bucket = `${name}_bucket`;
    const values: Sample[] = [];
    for (const series of this.series.values()) {
      const shared = series.labels as Record<string, string | number>;
      let cumulative = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        cumulative += series.counts[i]!;
        values.push(sample({ le: this.bounds[i]! }, cumulative, bucket, shared, null));
      }
      values.push(sample({ le: "+Inf" }, series.count, bucket, shared, null));
      values.push(sample({}, series.sum, `${name}_sum`, shared, undefined));
      values.push(sample({}, series.count, `${name}_count`, shared, undefined));
    }
    return values;
  }
}

type Sample = {
  labels: Record<string, string | number>;
  sharedLabels: Record<string, string | number>;
  value: number;
  metricName: string;
  /** null on a bucket, undefined on _sum and _count, as prom-client has them. */
  exemplar: null | undefined;
};

function sample(
  labels: Record<string, string | number>,
  value: number,
  metricName: string,
  sharedLabels: Record<string, string | number>,
  exemplar: null | undefined,
): Sample {
  return { labels, sharedLabels, value, metricName, exemplar };
}

/**
 * The Histogram prom-client registers and reads for a TalliedHistogram: its own storage stays
 * empty; reads answer with the tally's samples.
 */
class SamplesView<L extends string> extends Histogram<L> {
  constructor(
    config: HistogramConfiguration<L>,
    private readonly read: () => Sample[],
    private readonly clear: () => void,
  ) {
    super(config);
  }

  override async get(): ReturnType<Histogram<L>["get"]> {
    const data = await this.getForPromString();
    // prom-client's get() puts each sample's series labels into its own (splayLabels).
    return {
      ...data,
      values: data.values.map((s) => {
        const { sharedLabels, labels, ...rest } = s as unknown as Sample;
        return { ...rest, labels: { ...labels, ...sharedLabels } };
      }),
    } as unknown as Awaited<ReturnType<Histogram<L>["get"]>>;
  }

  /** What the registry's text output reads when a metric has it (prom-client registry.js). */
  async getForPromString(): ReturnType<Histogram<L>["get"]> {
    const self = this as unknown as {
      name: string;
      help: string;
      type: string;
      aggregator: string;
    };
    return {
      name: self.name,
      help: self.help,
      type: self.type,
      values: this.read(),
      aggregator: self.aggregator,
    } as unknown as Awaited<ReturnType<Histogram<L>["get"]>>;
  }

  override reset(): void {
    // prom-client's constructor resets too, before `clear` is set: nothing to clear then.
    (this.clear as (() => void) | undefined)?.();
  }
}
