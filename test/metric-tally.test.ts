import fc from "fast-check";
import { Counter, Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { TalliedCounter, TalliedHistogram } from "../src/metric-tally.js";

const BUCKETS = [0.005, 0.01, 0.1, 0.5, 1, 2.5];
const ENDPOINTS = ["chat", "completions", 'we"ird\\name'];

/** The same metric twice: prom-client's own and the tallied one, each in a registry of its own. */
function pair() {
  const own = new Registry();
  const tallied = new Registry();
  const config = { name: "x_seconds", help: "x", labelNames: ["endpoint"] as const };
  const plain = {
    own,
    tallied,
    histogram: new Histogram({ ...config, buckets: BUCKETS, registers: [own] }),
    tally: new TalliedHistogram({ ...config, buckets: BUCKETS, registers: [tallied] }),
    counter: new Counter({ name: "x_total", help: "y", labelNames: ["a", "b"], registers: [own] }),
    counterTally: new TalliedCounter({
      name: "x_total",
      help: "y",
      labelNames: ["a", "b"],
      registers: [tallied],
    }),
    unlabelled: new Histogram({
      name: "x_ratio",
      help: "z",
      buckets: [0, 0.5, 1],
      registers: [own],
    }),
    unlabelledTally: new TalliedHistogram({
      name: "x_ratio",
      help: "z",
      buckets: [0, 0.5, 1],
      registers: [tallied],
    }),
  };
  return plain;
}

const observation = fc.record({
  endpoint: fc.constantFrom(...ENDPOINTS),
  value: fc.oneof(
    fc.constantFrom(0, 0.005, 0.01, 1, 2.5, 3),
    fc.double({ min: 0, max: 5, noNaN: true }),
  ),
  ratio: fc.double({ min: 0, max: 1, noNaN: true }),
  a: fc.constantFrom("p", "q"),
  b: fc.constantFrom("x", "y", "z"),
  add: fc.integer({ min: 0, max: 1000 }),
});

describe("TalliedCounter and TalliedHistogram (request-path metrics, issue 21)", () => {
  it("show exactly what prom-client's Counter and Histogram show, in text and JSON", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (observations) => {
        const m = pair();
        for (const o of observations) {
          m.histogram.observe({ endpoint: o.endpoint }, o.value);
          m.tally.observe({ endpoint: o.endpoint }, o.value);
          m.unlabelled.observe(o.ratio);
          m.unlabelledTally.observe(o.ratio);
          m.counter.inc({ a: o.a, b: o.b }, o.add);
          m.counterTally.inc({ a: o.a, b: o.b }, o.add);
        }
        expect(await m.tallied.metrics()).toBe(await m.own.metrics());
        expect(await m.tallied.getMetricsAsJSON()).toEqual(await m.own.getMetricsAsJSON());
      }),
      { numRuns: 200 },
    );
  });

  it("reads add the counts once: a second scrape shows the same totals", async () => {
    const m = pair();
    m.counterTally.inc({ a: "p", b: "x" }, 3);
    const first = await m.tallied.metrics();
    expect(await m.tallied.metrics()).toBe(first);
    m.counterTally.inc({ a: "p", b: "x" });
    expect(await m.tallied.metrics()).toContain('x_total{a="p",b="x"} 4');
  });

  it("a registry reset empties the tallied histogram, as prom-client's", async () => {
    const m = pair();
    m.tally.observe({ endpoint: "chat" }, 0.2);
    m.histogram.observe({ endpoint: "chat" }, 0.2);
    m.unlabelledTally.observe(0.7);
    m.unlabelled.observe(0.7);
    m.own.resetMetrics();
    m.tallied.resetMetrics();
    expect(await m.tallied.metrics()).toBe(await m.own.metrics());
  });

  it("ignores a non-finite or negative value instead of throwing on the request path", async () => {
    const m = pair();
    m.tally.observe({ endpoint: "chat" }, Number.NaN);
    m.unlabelledTally.observe(Number.POSITIVE_INFINITY);
    m.counterTally.inc({ a: "p", b: "x" }, -1);
    m.counterTally.inc({ a: "p", b: "x" }, Number.POSITIVE_INFINITY);
    expect(await m.tallied.metrics()).toBe(await m.own.metrics());
  });
});
