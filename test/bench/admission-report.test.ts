import { describe, expect, it } from "vitest";
import type { Outcome } from "../../bench/lib/admission-load.js";
import {
  p99Of,
  pooledRuns,
  type Run,
  repeatedTargets,
  split,
  targetRows,
} from "../../bench/lib/admission-report.js";

const served = (group: string, ttftMs: number, routerWaitMs: number | undefined): Outcome => ({
  group,
  status: 200,
  ttftMs,
  routerWaitMs,
  tokens: 16,
  retryAfter: false,
  sentAt: 0,
  endedAt: 0,
  worker: undefined,
});

describe("bench:admission's TTFT split", () => {
  it("pools the groups and subtracts each request's own wait, not one quantile from another", () => {
    const run: Run = {
      name: "flood/on",
      spanSecs: 1,
      outcomes: [
        served("B", 100, 90), // held, then 10 ms at the engine
        served("C", 60, 0), // never held, 60 ms at the engine
        served("D", 20, 0),
        served("A", 5000, 4000), // not in the pooled group
        { ...served("B", 0, undefined), status: 429, ttftMs: undefined, retryAfter: true },
      ],
    };
    const s = split(run, "B-D", ["B", "C", "D"]);
    expect(s).toMatchObject({ run: "flood/on", group: "B-D", n: 3, unread: 0, held: 1 });
    expect([s?.ttft.p50, s?.ttft.p99]).toEqual([60, 100]);
    expect([s?.wait.p50, s?.wait.p99]).toEqual([0, 90]);
    // Per request: 10, 60, 20 — p99 60, where p99(TTFT) − p99(wait) would say 10.
    expect([s?.rest.p50, s?.rest.p99]).toEqual([20, 60]);
    expect(p99Of([run], "flood/on", ["B", "C", "D"])).toEqual({ p99: 100, n: 3 });
  });

  it("leaves out and counts answers without the wait header, and has nothing for absent groups", () => {
    const run: Run = {
      name: "silent",
      spanSecs: 1,
      outcomes: [served("B", 10, 0), served("C", 12, undefined)],
    };
    expect(split(run, "B-D", ["B", "C"])).toMatchObject({ n: 1, unread: 1 });
    expect(split(run, "high", ["high"])).toBeUndefined();
    expect(p99Of([run], "flood/on", ["B"]).n).toBe(0);
  });
});

describe("bench:admission --repeats", () => {
  /** A run whose light groups all have the same TTFT, and a fleet of `tokens` a second. */
  const run = (name: string, ttftMs: number, tokens = 16): Run => ({
    name,
    spanSecs: 1,
    outcomes: ["B", "C", "D"].map((g) => ({ ...served(g, ttftMs, 0), tokens })),
  });
  const repeat = (floodTtft: number, floodTokens: number) =>
    targetRows(
      [run("silent", 10), run("flood/off", 1000), run("flood/on", floodTtft, floodTokens)],
      ["B", "C", "D"],
      0,
    );

  it("gives each target's median and its worst: the highest of a ratio capped above, the lowest of a throughput", () => {
    const summary = repeatedTargets([repeat(50, 16), repeat(90, 15), repeat(70, 17)]);
    const row = (target: string) => summary.find((r) => r[0] === target);
    expect(row("B-D p99 TTFT, flood/on ÷ silent")).toEqual([
      "B-D p99 TTFT, flood/on ÷ silent",
      "5.00 9.00 7.00",
      "7.00",
      "9.00",
      "<= 8",
    ]);
    expect(row("fleet tok/s, flood/on ÷ flood/off")?.slice(2)).toEqual([
      "1.000",
      "0.938",
      ">= 0.97",
    ]);
    expect(row("requests lost (neither served nor 429/503 + Retry-After)")?.slice(2)).toEqual([
      "0",
      "0",
      "0",
    ]);
    // Runs not made (flood/prio here) have no row.
    expect(row("B-D p99 TTFT, flood/prio ÷ silent")).toBeUndefined();
  });

  it("pools every repeat's samples of a run into one p99, with the samples behind it", () => {
    /** A run whose 100 light requests take 10 ms, but `slow` of them `slowMs`. */
    const runOf = (name: string, slow: number, slowMs: number): Run => ({
      name,
      spanSecs: 1,
      outcomes: Array.from({ length: 100 }, (_, i) => served("B", i < slow ? slowMs : 10, 0)),
    });
    // One repeat's silent run had 2 stalls of 100 ms (its p99: 100), the others none.
    const traced = [
      [runOf("silent", 2, 100), runOf("flood/on", 100, 40)],
      [runOf("silent", 0, 100), runOf("flood/on", 100, 40)],
      [runOf("silent", 0, 100), runOf("flood/on", 100, 40)],
    ];
    const perRepeat = traced.map((runs) => targetRows(runs, ["B"], 0));
    const pooled = targetRows(
      pooledRuns(
        traced.flatMap((runs, i) =>
          runs.map((r) => ({ repeat: i + 1, run: r.name, outcomes: r.outcomes })),
        ),
      ),
      ["B"],
      0,
    );
    const row = repeatedTargets(perRepeat, pooled).find(
      (r) => r[0] === "B-D p99 TTFT, flood/on ÷ silent",
    );
    // Per repeat 0.40, 4.00, 4.00; over 300 samples a side the 2 stalls are below the p99.
    expect(row).toEqual([
      "B-D p99 TTFT, flood/on ÷ silent",
      "0.40 4.00 4.00",
      "4.00",
      "4.00",
      "4.00",
      "300 / 300",
      "<= 8",
    ]);
  });
});
