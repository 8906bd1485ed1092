import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { HistogramAlias } from "../src/metric-alias.js";

function histogramWithAlias() {
  const registry = new Registry();
  const source = new Histogram({
    name: "x_match_ratio",
    help: "the ratio",
    buckets: [0.5, 1],
    registers: [registry],
  });
  new HistogramAlias(source, "x_match_ratio", "x_match_rate", "Deprecated alias", [registry]);
  return { registry, source };
}

describe("HistogramAlias (a deprecated name read from its source at scrape)", () => {
  it("shows every sample of the source under the old name, observed once", async () => {
    const { registry, source } = histogramWithAlias();
    source.observe(0.25);
    source.observe(0.75);
    const text = await registry.metrics();
    for (const sample of ['_bucket{le="0.5"} 1', '_bucket{le="1"} 2', "_sum 1", "_count 2"]) {
      expect(text).toContain(`x_match_ratio${sample}\n`);
      expect(text).toContain(`x_match_rate${sample}\n`);
    }
    expect(text).toMatch(/^# HELP x_match_rate Deprecated alias$/m);
    expect(text).toMatch(/^# TYPE x_match_rate histogram$/m);
  });

  it("answers the JSON read (get) under its own name too", async () => {
    const { registry, source } = histogramWithAlias();
    source.observe(0.25);
    const json = await registry.getMetricsAsJSON();
    const alias = json.find((m) => m.name === "x_match_rate");
    const names = (alias?.values ?? []).map((v) => (v as { metricName?: string }).metricName);
    expect(names).toContain("x_match_rate_count");
    expect(names.every((n) => n?.startsWith("x_match_rate_"))).toBe(true);
  });
});
