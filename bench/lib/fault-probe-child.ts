/** The child-process side of startProbeProcess(): one phase of legitimate load and probing at a time. */

import type { ProbeConfig, ProbeReply, ProbeRequest, ProbeResult } from "./fault-probe.js";
import { quantile } from "./latency.js";

const REQUEST_TIMEOUT_MS = 30_000;

function reply(msg: ProbeReply): void {
  if (process.connected) process.send?.(msg);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Phase {
  stopped: boolean;
  done: Promise<unknown>;
  result: ProbeResult;
  latencies: number[];
  workerLatencies: number[];
}

let phase: Phase | undefined;

function start(config: ProbeConfig): Phase {
  const result: ProbeResult = {
    ok: 0,
    refused: 0,
    lost: 0,
    p50Ms: 0,
    p99Ms: 0,
    worstHealthMs: 0,
    healthFailures: 0,
    workerP99Ms: 0,
  };
  const latencies: number[] = [];
  const workerLatencies: number[] = [];
  const p: Phase = { stopped: false, done: Promise.resolve(), result, latencies, workerLatencies };
  const client = async (i: number, url = config.url) => {
    const direct = url !== config.url;
    while (!p.stopped) {
      const started = performance.now();
      try {
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({
            ...(config.model === undefined ? {} : { model: config.model }),
            messages: [
              {
                role: "user",
                content: `legitimate client ${i}: a short question ${latencies.length % 50}`,
              },
            ],
            max_tokens: 4,
          }),
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        await res.arrayBuffer();
        if (direct) {
          // Not the target's traffic: only its latency counts, as the workers' own.
          if (res.status === 200) workerLatencies.push(performance.now() - started);
          else await sleep(50);
        } else if (res.status === 200) {
          result.ok++;
          latencies.push(performance.now() - started);
        } else if (res.status === 429 || res.status === 503) {
          result.refused++;
          await sleep(50);
        } else result.lost++;
      } catch {
        if (!direct) result.lost++;
        await sleep(50);
      }
    }
  };
  const health = async () => {
    while (!p.stopped) {
      const started = performance.now();
      try {
        const res = await fetch(`${config.url}/health`, {
          signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
        });
        await res.arrayBuffer();
        if (!res.ok) result.healthFailures++;
      } catch {
        result.healthFailures++;
      }
      result.worstHealthMs = Math.max(result.worstHealthMs, performance.now() - started);
      await sleep(config.healthEveryMs);
    }
  };
  const clients = Array.from({ length: config.clients }, (_, i) => client(i));
  if (config.workerUrl !== undefined) clients.push(client(config.clients, config.workerUrl));
  p.done = Promise.all([...clients, health()]);
  return p;
}

async function stop(p: Phase): Promise<ProbeResult> {
  p.stopped = true;
  await p.done;
  p.latencies.sort((a, b) => a - b);
  p.workerLatencies.sort((a, b) => a - b);
  const round = (v: number) => Math.round(v * 10) / 10;
  return {
    ...p.result,
    p50Ms: round(quantile(p.latencies, 0.5)),
    p99Ms: round(quantile(p.latencies, 0.99)),
    worstHealthMs: round(p.result.worstHealthMs),
    workerP99Ms: p.workerLatencies.length === 0 ? 0 : round(quantile(p.workerLatencies, 0.99)),
  };
}

process.on("message", (msg: ProbeRequest) => {
  if (msg.type === "exit") process.exit(0);
  if (msg.type === "start") {
    phase = start(msg.config);
    return;
  }
  const current = phase;
  phase = undefined;
  if (current === undefined) return reply({ type: "error", message: "no phase under way" });
  stop(current).then(
    (result) => reply({ type: "result", result }),
    (err: unknown) => reply({ type: "error", message: (err as Error).message }),
  );
});

process.on("disconnect", () => process.exit(0));
