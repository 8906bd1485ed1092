/**
 * The requests of bench:overhead and bench:overhead-ab: chat completions of 16 output tokens over
 * 64 distinct seeded prompts of one size, cycled (so the worker's KV cache and the router's index
 * hold them all after the warm-up).
 */
import { mulberry32 } from "../../sim/prng.js";
import { randomText } from "../../sim/workloads.js";
import { type LatencySummary, summarizeMs } from "./latency.js";
import { type LoadJob, loadAgent, runLoad } from "./load.js";
import { processCpuMicros } from "./process-cpu.js";
import { ProgressBar } from "./progress.js";

export const DISTINCT_PROMPTS = 64;
export const OUTPUT_TOKENS = 16;

/** DISTINCT_PROMPTS seeded prompts of exactly `chars` characters. */
export function overheadPrompts(chars: number, seed = chars): string[] {
  const rng = mulberry32(seed);
  return Array.from({ length: DISTINCT_PROMPTS }, (_, i) =>
    `#${i} ${randomText(rng, Math.ceil(chars / 4))}`.slice(0, chars),
  );
}

/** `n` chat requests to `origin` cycling over `texts`, streamed or not. */
export function overheadJobs(
  origin: string,
  texts: readonly string[],
  stream: boolean,
  n: number,
): LoadJob[] {
  return Array.from({ length: n }, (_, i) => ({
    key: String(i),
    request: {
      origin,
      path: "/v1/chat/completions",
      body: JSON.stringify({
        messages: [{ role: "user", content: texts[i % texts.length] }],
        max_tokens: OUTPUT_TOKENS,
        ...(stream ? { stream: true } : {}),
      }),
      stream,
    },
  }));
}

export interface TargetResult {
  requests: number;
  errors: number;
  latencyMs: LatencySummary;
  /** Streams only: time to the first content chunk. */
  ttftMs: LatencySummary;
  requestsPerSec: number;
  /** The proxy process's CPU time per measured request (/proc; not for the direct target). */
  cpuMicrosPerRequest?: number;
  /** Of it, the first process's (radixgate's own beside the nginx it starts). */
  firstCpuMicrosPerRequest?: number;
}

/**
 * Sends `warmup` requests, then `requests` measured ones, to one target at a fixed concurrency;
 * a proxy given with its pid also gets its CPU time per request (/proc). `label` shows progress.
 */
export async function measure(
  /**
   * A URL, or a proxy whose CPU time is read around the measurement: the pid of its process, or
   * of each of its processes (the router and its nginx with --data-plane nginx).
   */
  target: { url: string; pid: number | (() => readonly number[]) } | string,
  texts: readonly string[],
  stream: boolean,
  concurrency: number,
  requests: number,
  warmup: number,
  label?: string,
): Promise<TargetResult> {
  const origin = typeof target === "string" ? target : target.url;
  /** [all processes, the first one], µs. */
  const cpuMicros = (): [number, number] | undefined => {
    if (typeof target === "string") return undefined;
    const pids = typeof target.pid === "number" ? [target.pid] : target.pid();
    let sum = 0;
    let first: number | undefined;
    for (const pid of pids) {
      const micros = processCpuMicros(pid);
      if (micros === undefined) return undefined;
      first ??= micros;
      sum += micros;
    }
    return first === undefined ? undefined : [sum, first];
  };
  const dispatcher = loadAgent(concurrency);
  try {
    if (warmup > 0)
      await runLoad(overheadJobs(origin, texts, stream, warmup), { dispatcher, concurrency });
    const cpuBefore = cpuMicros();
    const bar = label === undefined ? undefined : new ProgressBar(label, requests);
    const run = await runLoad(overheadJobs(origin, texts, stream, requests), {
      dispatcher,
      concurrency,
      ...(bar === undefined ? {} : { onDone: () => bar.tick() }),
    });
    bar?.finish();
    const cpuAfter = cpuMicros();
    const ok = run.outcomes.filter((o) => o.ok);
    return {
      requests,
      errors: requests - ok.length,
      latencyMs: summarizeMs(ok.map((o) => o.e2eMs)),
      ttftMs: summarizeMs(stream ? ok.map((o) => o.ttftMs) : []),
      requestsPerSec: (ok.length * 1000) / run.wallMs,
      ...(cpuBefore !== undefined && cpuAfter !== undefined
        ? {
            cpuMicrosPerRequest: (cpuAfter[0] - cpuBefore[0]) / requests,
            firstCpuMicrosPerRequest: (cpuAfter[1] - cpuBefore[1]) / requests,
          }
        : {}),
    };
  } finally {
    await dispatcher.close();
  }
}
