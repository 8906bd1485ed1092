/** Summary statistics over nanosecond samples (the array is sorted in place). */
export interface Summary {
  count: number;
  medianNs: number;
  p99Ns: number;
  meanNs: number;
  maxNs: number;
}

export function summarize(samples: number[]): Summary {
  if (samples.length === 0) throw new RangeError("summarize needs at least one sample");
  samples.sort((a, b) => a - b);
  const at = (q: number): number =>
    samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  let sum = 0;
  for (const s of samples) sum += s;
  return {
    count: samples.length,
    medianNs: at(0.5),
    p99Ns: at(0.99),
    meanNs: sum / samples.length,
    maxNs: samples[samples.length - 1]!,
  };
}

/** The median of the finite values (NaN when there are none). */
export function median(values: readonly number[]): number {
  const v = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return Number.NaN;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 === 1 ? v[mid]! : (v[mid - 1]! + v[mid]!) / 2;
}

/** Prints rows as an aligned text table. */
export function printTable(headers: string[], rows: (string | number)[][]): void {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, c) => Math.max(...cells.map((r) => r[c]!.length)));
  const line = (r: string[]): string => r.map((v, c) => v.padStart(widths[c]!)).join("  ");
  console.log(line(headers));
  console.log(widths.map((w) => "-".repeat(w)).join("  "));
  for (const r of cells.slice(1)) console.log(line(r));
}
