/**
 * Reading an engine's GET /metrics (Prometheus text exposition format). Parsing is the library's
 * job (parse-prometheus-text-format, a port of Prometheus's own text parser); this file only turns
 * its output into numbers and sums or averages a metric over its series (one per DP rank / engine).
 */
import parsePrometheusTextFormat from "parse-prometheus-text-format";

export interface Sample {
  readonly labels: Readonly<Record<string, string>>;
  /** NaN when the sample's value is not a number. */
  readonly value: number;
}

/** Metric name → its samples (gauges, counters and untyped metrics; histograms are skipped). */
export type MetricFamilies = ReadonlyMap<string, readonly Sample[]>;

/** The text is not a Prometheus exposition (an HTML page, JSON, a truncated body...). */
export class ExpositionError extends Error {
  override name = "ExpositionError";
}

export function parseExposition(text: string): MetricFamilies {
  let parsed: ReturnType<typeof parsePrometheusTextFormat>;
  try {
    parsed = parsePrometheusTextFormat(text);
  } catch (err) {
    throw new ExpositionError(`not Prometheus text format (${(err as Error).message})`);
  }
  if (!Array.isArray(parsed) || parsed.length === 0) {
    throw new ExpositionError("not Prometheus text format (no metric found)");
  }
  const families = new Map<string, Sample[]>();
  for (const family of parsed) {
    const samples: Sample[] = [];
    for (const metric of family.metrics) {
      if (metric.value === undefined) continue;
      samples.push({ labels: metric.labels ?? {}, value: Number(metric.value) });
    }
    // A family printed in two groups (not what the format allows, but seen) keeps both.
    const earlier = families.get(family.name);
    if (earlier !== undefined) earlier.push(...samples);
    else if (samples.length > 0) families.set(family.name, samples);
  }
  return families;
}

/** Finite values of the first of `names` present (older engines used other names). */
function valuesOf(families: MetricFamilies, names: readonly string[]): number[] | undefined {
  for (const name of names) {
    const samples = families.get(name);
    if (samples === undefined) continue;
    const values = samples.map((s) => s.value).filter((v) => Number.isFinite(v));
    return values.length > 0 ? values : undefined;
  }
  return undefined;
}

/** Sum over the series (counts per DP rank or engine add up), undefined when absent. */
export function sumOf(families: MetricFamilies, ...names: string[]): number | undefined {
  const values = valuesOf(families, names);
  return values?.reduce((a, b) => a + b, 0);
}

/** Mean over the series (a usage fraction per rank), undefined when absent. */
export function meanOf(families: MetricFamilies, ...names: string[]): number | undefined {
  const values = valuesOf(families, names);
  return values === undefined ? undefined : values.reduce((a, b) => a + b, 0) / values.length;
}
