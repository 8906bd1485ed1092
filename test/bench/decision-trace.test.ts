import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  alignWorkers,
  divergences,
  explainTraces,
  parseTrace,
  summarizeTrace,
} from "../../bench/lib/decision-trace-explain.js";
import { prepareWorkload, QUICK_PRESET } from "../../bench/lib/routing-workloads.js";
import { replay } from "../../bench/lib/ttft-replay.js";
import { createPolicy, type PolicyOptions } from "../../src/scheduling/builtin-profiles.js";
import { DecisionTrace, fileDecisionTrace, textHash } from "../../src/scheduling/decision-trace.js";

const workload = prepareWorkload("cache-pressure", QUICK_PRESET);
const base = { workers: QUICK_PRESET.workers, concurrency: QUICK_PRESET.concurrency };

/** A replay of the workload under prefix_cost with `options`, traced; the trace's text. */
async function traced(options: PolicyOptions): Promise<{ text: string; hitRate: number }> {
  const lines: string[] = [];
  const trace = new DecisionTrace({ write: (l) => lines.push(l) > 0 }, 1e6, () => 0);
  const chooser = { kind: "policy" as const, policy: createPolicy("prefix_cost", options) };
  const r = await replay(workload, { ...base, chooser, trace });
  return { text: lines.join(""), hitRate: r.hitRate };
}

describe("decision trace", () => {
  it("records every decision with its candidates and outcome; the summary's hit rate is the run's", async () => {
    const { text, hitRate } = await traced({});
    const trace = parseTrace(text);
    expect(trace.bad).toBe(0);
    expect(trace.decisions).toHaveLength(workload.specs.length);
    for (const d of trace.decisions) {
      expect(d.c).toHaveLength(base.workers);
      expect(d.c.map((r) => r[0])).toContain(d.w);
      expect(d.cached).toBeLessThanOrEqual(d.prompt!);
      // prefix_cost's cost is traced, and the choice has the lowest of it or settles a near-tie.
      const costs = d.c.map((r) => r[5]!);
      const chosen = d.c.find((r) => r[0] === d.w)![5]!;
      expect(chosen).toBeLessThanOrEqual(Math.min(...costs) + 256 / 2 + 1);
    }
    expect(summarizeTrace(trace).hitRate).toBeCloseTo(hitRate, 12);
    // The trace holds hashes, never the texts.
    expect(text).not.toContain(workload.specs[0]!.messages?.[0]?.content ?? "\u0000");
  });

  it("finds no divergence between two runs of one deterministic replay, and names them between two policies", async () => {
    const a = parseTrace((await traced({})).text);
    const again = parseTrace((await traced({})).text);
    expect(divergences(a, again).differ).toEqual([]);
    const b = parseTrace((await traced({ prefixCostEvictionWeight: 0 })).text);
    const { matched, differ } = divergences(a, b);
    expect(matched).toBe(workload.specs.length);
    expect(differ.length).toBeGreaterThan(0);
    for (const x of differ) {
      expect(x.a.h).toBe(x.b.h);
      expect(x.a.w).not.toBe(x.b.w);
    }
    const report = explainTraces(a, b, 3);
    expect(report[2]).toMatch(new RegExp(`^${matched} texts in both, ${differ.length} routed`));
    expect(report.filter((l) => l.startsWith("   A #"))).toHaveLength(Math.min(3, differ.length));
  });

  it("is bounded: past maxRecords, or while the sink is backed up, lines are dropped and counted", () => {
    const lines: string[] = [];
    let open = true;
    const trace = new DecisionTrace({ write: (l) => open && lines.push(l) > 0 }, 3);
    const w = { id: "w0", inFlight: 0 };
    const row = [{ worker: w, held: 0, fill: 0, cost: null }];
    expect(trace.decided("a", undefined, row, "w0", "lowest_cost")).toBe(1);
    open = false;
    expect(trace.decided("b", undefined, row, "w0", "lowest_cost")).toBe(-1);
    trace.outcome(-1, 10, 5); // a dropped decision has no outcome line
    open = true;
    trace.outcome(1, 10, 5);
    trace.decided("c", undefined, row, "w0", "lowest_cost");
    trace.decided("d", undefined, row, "w0", "lowest_cost");
    expect(lines).toHaveLength(3);
    expect(trace.dropped).toBe(2);
    expect(JSON.parse(lines[0]!).h).toBe(textHash("a"));
    expect(parseTrace(lines.join("")).decisions[0]).toMatchObject({ prompt: 10, cached: 5 });
  });

  it("appends to a file and flushes it on close", async () => {
    const path = join(mkdtempSync(join(tmpdir(), "trace-")), "t.jsonl");
    const file = fileDecisionTrace(path);
    const w = { id: "w0", inFlight: 1, pendingPrefillChars: 40 };
    const n = file.trace.decided(
      "text",
      "m",
      [{ worker: w, held: 2, fill: 0.5, cost: 3 }],
      "w0",
      "x",
    );
    file.trace.outcome(n, 7, 1);
    await file.close();
    const t = parseTrace(readFileSync(path, "utf8"));
    expect(t.decisions).toEqual([
      expect.objectContaining({
        m: "m",
        len: 4,
        w: "w0",
        c: [["w0", 2, 0.5, 1, 40, 3]],
        prompt: 7,
        cached: 1,
      }),
    ]);
  });

  it("names a worker's URL on its first decision line only", () => {
    const lines: string[] = [];
    const trace = new DecisionTrace({ write: (l) => lines.push(l) > 0 }, 10, () => 0);
    const w = (id: string) => ({
      worker: { id, inFlight: 0 },
      url: `http://h/${id}`,
      held: 0,
      fill: 0,
      cost: null,
    });
    trace.decided("a", undefined, [w("x")], "x", "b");
    trace.decided("b", undefined, [w("x"), w("y")], "y", "b");
    trace.decided("c", undefined, [w("x"), w("y")], "y", "b");
    expect(lines.map((l) => JSON.parse(l).u)).toEqual([
      { x: "http://h/x" },
      { y: "http://h/y" },
      undefined,
    ]);
  });

  it("matches two runs' workers by URL, else by order and the most texts sent alike", () => {
    // Run B on other ports (other ids), its tenants placed as A's but each on the next worker.
    const d = (n: number, h: string, w: string, ids: string[], urls?: string[]) => ({
      n,
      t: n,
      h,
      len: 10,
      m: null,
      c: ids.map((id) => [id, 0, 0, 0, 0, null] as [string, number, number, number, number, null]),
      w,
      b: "lowest_cost",
      ...(urls === undefined ? {} : { u: Object.fromEntries(ids.map((id, i) => [id, urls[i]!])) }),
    });
    const ids = ["a1", "a2", "a3"];
    const other = ["b1", "b2", "b3"];
    const a = {
      bad: 0,
      decisions: [
        d(1, "t1", "a1", ids, ["u1", "u2", "u3"]),
        d(2, "t2", "a2", ids),
        d(3, "t1", "a1", ids),
        d(4, "t3", "a3", ids),
      ],
    };
    const b = {
      bad: 0,
      decisions: [
        d(1, "t1", "b2", other, ["v1", "v2", "v3"]),
        d(2, "t2", "b3", other),
        d(3, "t1", "b2", other),
        d(4, "t3", "b3", other),
      ],
    };
    // The same split of texts over workers, under other names: only t3 (alone with t2 on b3) differs.
    const { matched, differ } = divergences(a, b);
    expect(matched).toBe(4);
    expect(differ.map((x) => x.key)).toEqual(["t3#0"]);
    const [na, nb] = alignWorkers(a, b);
    expect(na.decisions.map((x) => x.w)).toEqual(["w1", "w2", "w1", "w3"]);
    expect(nb.decisions.map((x) => x.w)).toEqual(["w1", "w2", "w1", "w2"]);
    // On the same URLs (fixed ports), workers are their URLs.
    const c = { bad: 0, decisions: [d(1, "t1", "b1", other, ["u1", "u2", "u3"])] };
    const [, nc] = alignWorkers(a, c);
    expect(nc.decisions[0]!.c.map((r) => r[0])).toEqual(["u1", "u2", "u3"]);
  });
});
