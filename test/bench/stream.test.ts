import { describe, expect, it } from "vitest";
import { type StreamLoadResult, streamIsExact } from "../../bench/lib/stream-load.js";
import { summarize } from "../../bench/lib/stream-report.js";
import { runStreamBench } from "../../bench/stream.js";
import { generatedTokenText } from "../../sim/output-text.js";
import { nginxWithNjs } from "../helpers/nginx.js";

const event = (content: string) =>
  `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content } }] })}\n\n`;
const exact = (tokens: number[]) =>
  `${event("")}${tokens.map((i) => event(generatedTokenText(i))).join("")}data: [DONE]\n\n`;
/** The same with the counts' event before [DONE] (stream_options.include_usage). */
const withUsage = (tokens: number[]) =>
  exact(tokens).replace(
    "data: [DONE]",
    `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: tokens.length } })}\n\ndata: [DONE]`,
  );

/** A run whose first chunk came at `firstP50` ms (the other figures do not matter here). */
function runWithFirstChunk(firstP50: number): StreamLoadResult {
  const q = { count: 1, p50: firstP50, p99: firstP50, max: firstP50 };
  return {
    windowMs: 1000,
    chunks: 10,
    chunksPerSec: 10,
    started: 1,
    completed: 1,
    errors: 0,
    incomplete: 0,
    misordered: 0,
    headersMs: q,
    firstChunkMs: q,
    gapMs: q,
  } as StreamLoadResult;
}

/** A smoke run's pacing: a few short streams, every chunk checked. */
const SMOKE = {
  chunks: 6,
  intervalMs: 5,
  firstTokenMs: 5,
  streams: [4],
  durationSecs: 0.5,
  rounds: 1,
  engines: 2,
  processes: 1,
  verify: true,
};

/** Every stream started ended whole: no error, nothing missing or out of order. */
function expectWhole(result: StreamLoadResult): void {
  expect(result.started).toBeGreaterThan(0);
  expect(result).toMatchObject({
    completed: result.started,
    errors: 0,
    incomplete: 0,
    misordered: 0,
  });
}

describe("bench:stream", () => {
  it("judges the added first chunk against 1.5 × nginx's added + 1 ms, round by round", () => {
    const runs = [0, 1, 2].flatMap((round) => [
      { row: "direct" as const, round, streams: 500, result: runWithFirstChunk(50) },
      // nginx adds 1, 2, 0.2 ms: the ratio to it swings (3.5, 1.75, 17.5), the target's limit does not.
      {
        row: "nginx" as const,
        round,
        streams: 500,
        result: runWithFirstChunk([51, 52, 50.2][round]!),
      },
      { row: "router-nginx" as const, round, streams: 500, result: runWithFirstChunk(53.5) },
    ]);
    const routerNginx = summarize(runs, { chunks: 10, intervalMs: 20, lifetimeMs: 250 }).find(
      (s) => s.row === "router-nginx",
    )!;
    // Added 3.5 ms each round; limits 2.5, 4, 1.3 ms: over by 1, -0.5, 2.2; the median 1 ms.
    expect(routerNginx.firstChunkOverTargetMs).toBeCloseTo(1, 6);
    expect(routerNginx.addedFirstChunkVsNginx).toBeCloseTo(3.5, 6);
  });

  it("checks a stream chunk by chunk: the role chunk, every token in order, then [DONE]", () => {
    expect(streamIsExact(exact([0, 1, 2, 3]), 4)).toBe(true);
    expect(streamIsExact(exact([0, 2, 1, 3]), 4)).toBe(false);
    expect(streamIsExact(exact([0, 1, 2]), 4)).toBe(false);
    expect(streamIsExact(exact([0, 1, 2, 3]).replace("data: [DONE]\n\n", ""), 4)).toBe(false);
    // --usage: the counts' event comes before [DONE], and only then.
    expect(streamIsExact(withUsage([0, 1, 2, 3]), 4, true)).toBe(true);
    expect(streamIsExact(withUsage([0, 1, 2, 3]), 4)).toBe(false);
    expect(streamIsExact(exact([0, 1, 2, 3]), 4, true)).toBe(false);
  });

  it("smoke run, direct and router: every chunk of every stream arrives in order, the report has its fields", async () => {
    const report = await runStreamBench({
      ...SMOKE,
      rows: ["direct", "router"],
      fromSource: true,
      idle: true,
    });
    expect(report.runs.map((r) => r.row).sort()).toEqual(["direct", "router"]);
    for (const { result } of report.runs) {
      expectWhole(result);
      expect(result.chunks).toBeGreaterThan(0);
      expect(result.firstChunkMs.count).toBe(result.started);
      expect(result.gapMs.count).toBe(result.started * 5);
      expect(result.headersMs.count).toBe(result.started);
    }
    const router = report.runs.find((r) => r.row === "router")!.result;
    expect(router.cpuMicros).toBeGreaterThanOrEqual(0);
    expect(router.rssPeakBytes).toBeGreaterThan(0);
    expect(report.summary.map((s) => s.row)).toEqual(["direct", "router"]);
    for (const key of [
      "chunksPerSec",
      "headersP99Ms",
      "addedFirstChunkP50Ms",
      "addedGapP99Ms",
      "cpuMicrosPerChunk",
      "rssPeakMB",
      "cpuVsNginx",
      "errors",
      "incomplete",
      "behindRounds",
    ]) {
      expect(report.summary[1]).toHaveProperty(key);
    }
    // --idle: the router's CPU with nothing in flight, once per proxy row (direct has no process).
    expect(report.idle.map((i) => i.row)).toEqual(["router"]);
    expect(report.idle[0]!.msPerSec).toBeGreaterThanOrEqual(0);
    expect(report).toHaveProperty("loadAverage");
    expect(report).toHaveProperty("machine");
  }, 90_000);

  it.skipIf(!nginxWithNjs())(
    "the nginx floor row (radixgate's nginx configuration, a decider that does nothing) relays every stream whole",
    async () => {
      const report = await runStreamBench({ ...SMOKE, rows: ["direct", "nginx-floor"] });
      const floor = report.runs.find((r) => r.row === "nginx-floor")!.result;
      expectWhole(floor);
      // Two processes counted: the Node.js decider's CPU is a part of the row's.
      expect(floor.cpuFirstMicros).toBeLessThanOrEqual(floor.cpuMicros!);
    },
    90_000,
  );

  it.skipIf(!nginxWithNjs())(
    "--usage: streams that ask for the counts pass the floor's usage reader whole, counts event included",
    async () => {
      const report = await runStreamBench({
        ...SMOKE,
        rows: ["direct", "nginx-floor"],
        usage: true,
      });
      for (const { result } of report.runs) expectWhole(result);
    },
    90_000,
  );
});
