/**
 * bench:stream's load: C streamed chat completions held open at once, each with a prompt of its
 * own, for D seconds. A slot whose stream ends starts the next one at once. The slots start spread
 * over one stream lifetime (a ramp, not measured), so the streams do not all tick together; the
 * measured window is the D seconds after the ramp; streams still open when it ends are awaited.
 *
 * It runs in a process of its own (stream-load-process.ts), on raw node:http with one keep-alive
 * socket per stream, and counts events by scanning for the blank line that ends each one: no JSON
 * parsing on the hot path, except in `verify` mode, which checks every chunk's text and order.
 */
import { Agent, type IncomingMessage, request } from "node:http";
import { generatedTokenText } from "../../sim/output-text.js";
import { MsHistogram, type MsQuantiles } from "./ms-histogram.js";
import { processCpuMicros, processRssBytes } from "./process-cpu.js";

export interface StreamLoadConfig {
  /** Where streams go, in turn (the direct row lists every engine). */
  origins: string[];
  /** Concurrent streams (C). */
  streams: number;
  /** Token chunks per stream (K). */
  chunks: number;
  /** A stream's expected lifetime, ms (first-token delay + K intervals): the ramp. */
  lifetimeMs: number;
  /** The measured window (D), ms. */
  durationMs: number;
  /** Distinguishes this run's prompts from every other run's (no cache hits across rows). */
  label: string;
  model: string;
  /** Check every chunk's text and order (slower; the smoke test). */
  verify: boolean;
  /**
   * Ask for the token counts (stream_options.include_usage): the engine sends them in one more
   * event before [DONE], and --data-plane nginx reads them with its body filter.
   */
  usage?: boolean;
  /** The proxy's processes, for CPU and RSS from /proc (none for direct). */
  pids: number[];
}

export interface StreamLoadResult {
  windowMs: number;
  /** Token chunks received during the window, from any stream. */
  chunks: number;
  chunksPerSec: number;
  /** Streams started during the window (the ones the figures below describe). */
  started: number;
  completed: number;
  /** Non-200 answers and connection errors. */
  errors: number;
  /** Streams that ended (or were cut at the drain timeout) without every chunk and [DONE]. */
  incomplete: number;
  /** verify mode: streams whose chunks were not exactly the engine's tokens in order. */
  misordered: number;
  headersMs: MsQuantiles;
  firstChunkMs: MsQuantiles;
  gapMs: MsQuantiles;
  /** The proxy's CPU time (user + system) during the window, µs. */
  cpuMicros?: number;
  /** Of cpuMicros, the first process's (the router's own, beside the nginx it starts), µs. */
  cpuFirstMicros?: number;
  /** The proxy's resident memory before the load and its peak during the window, bytes. */
  rssIdleBytes?: number;
  rssPeakBytes?: number;
}

const RSS_SAMPLE_MS = 250;

function sum(pids: readonly number[], read: (pid: number) => number | undefined) {
  let total = 0;
  for (const pid of pids) {
    const value = read(pid);
    if (value === undefined) return undefined;
    total += value;
  }
  return pids.length === 0 ? undefined : total;
}

/** Blank lines ("\n\n") in `chunk`, counting one split across the previous chunk's end. */
function eventEnds(chunk: Buffer, previousEndedWithNewline: boolean): number {
  let n = previousEndedWithNewline && chunk[0] === 0x0a ? 1 : 0;
  let i = chunk.indexOf("\n\n");
  while (i >= 0) {
    n++;
    i = chunk.indexOf("\n\n", i + 2);
  }
  return n;
}

/**
 * The role chunk, K token chunks in order, then [DONE]: what the simulated engine writes; with
 * `usage`, the counts' event (no choices) before [DONE].
 */
export function streamIsExact(body: string, chunks: number, usage = false): boolean {
  const events = body.split("\n\n").filter((e) => e !== "");
  const extra = usage ? 1 : 0;
  if (events.length !== chunks + 2 + extra || events[chunks + 1 + extra] !== "data: [DONE]")
    return false;
  if (usage && !/^data: \{.*"choices":\[\],"usage":\{"prompt_tokens":\d+/.test(events[chunks + 1]!))
    return false;
  for (let i = 0; i <= chunks; i++) {
    const event = events[i]!;
    if (!event.startsWith("data: ")) return false;
    const delta = (JSON.parse(event.slice(6)) as { choices: { delta: { content?: string } }[] })
      .choices[0]?.delta;
    if (delta?.content !== (i === 0 ? "" : generatedTokenText(i - 1))) return false;
  }
  return true;
}

export async function runStreamLoad(c: StreamLoadConfig): Promise<StreamLoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const headers = new MsHistogram();
  const firstChunk = new MsHistogram();
  const gaps = new MsHistogram();
  const result = {
    chunks: 0,
    started: 0,
    completed: 0,
    errors: 0,
    incomplete: 0,
    misordered: 0,
  };
  const rssIdleBytes = sum(c.pids, processRssBytes);
  let rssPeakBytes = rssIdleBytes;
  const t0 = performance.now();
  const windowStart = t0 + c.lifetimeMs;
  const windowEnd = windowStart + c.durationMs;
  let cpuStart: number | undefined;
  let cpuEnd: number | undefined;
  let firstStart: number | undefined;
  let firstEnd: number | undefined;
  const first = c.pids.slice(0, 1);
  let serial = 0;
  let open = 0;
  let allDone: () => void = () => {};
  const drained = new Promise<void>((resolve) => {
    allDone = resolve;
  });
  const live = new Set<ReturnType<typeof request>>();

  const startStream = (slot: number): void => {
    const sentAt = performance.now();
    if (sentAt >= windowEnd) {
      if (--open === 0) allDone();
      return;
    }
    const measured = sentAt >= windowStart;
    if (measured) result.started++;
    const n = serial++;
    const origin = c.origins[n % c.origins.length]!;
    const body = JSON.stringify({
      model: c.model,
      messages: [{ role: "user", content: `${c.label} stream ${n}: tell me a story, please.` }],
      max_tokens: c.chunks,
      stream: true,
      ...(c.usage === true ? { stream_options: { include_usage: true } } : {}),
    });
    let events = 0;
    let lastTokenAt = 0;
    let newline = false;
    let text = "";
    let settled = false;
    let responded = false;
    const finish = (ok: boolean, error: boolean) => {
      if (settled) return;
      settled = true;
      live.delete(req);
      if (measured) {
        if (error) result.errors++;
        else if (!ok) result.incomplete++;
        else result.completed++;
        if (ok && c.verify && !streamIsExact(text, c.chunks, c.usage === true)) result.misordered++;
      }
      startStream(slot);
    };
    const req = request(
      `${origin}/v1/chat/completions`,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res: IncomingMessage) => {
        responded = true;
        if (measured) headers.add(performance.now() - sentAt);
        if (res.statusCode !== 200) {
          res.resume();
          res.on("end", () => finish(false, true));
          return;
        }
        res.on("data", (chunk: Buffer) => {
          const now = performance.now();
          const ends = eventEnds(chunk, newline);
          newline = chunk[chunk.length - 1] === 0x0a;
          if (c.verify) text += chunk.toString("utf8");
          for (let e = 0; e < ends; e++) {
            events++;
            // Event 1 is the role chunk, 2 … K + 1 the tokens, then the counts (--usage), [DONE].
            if (events < 2 || events > c.chunks + 1) continue;
            if (now >= windowStart && now < windowEnd) result.chunks++;
            if (measured) {
              if (events === 2) firstChunk.add(now - sentAt);
              else gaps.add(now - lastTokenAt);
            }
            lastTokenAt = now;
          }
        });
        let ended = false;
        res.on("end", () => {
          ended = true;
        });
        res.on("error", () => {});
        // "close" comes after "end", and also when the connection dies mid-stream.
        res.on("close", () => finish(ended && events === c.chunks + (c.usage ? 3 : 2), false));
      },
    );
    live.add(req);
    req.on("error", () => {});
    // Without a response (refused, reset, cut before the headers): an error.
    req.on("close", () => {
      if (!responded) finish(false, true);
    });
    req.end(body);
  };

  const timers: NodeJS.Timeout[] = [];
  open = c.streams;
  for (let slot = 0; slot < c.streams; slot++) {
    timers.push(setTimeout(() => startStream(slot), (slot * c.lifetimeMs) / c.streams));
  }
  timers.push(
    setTimeout(() => {
      cpuStart = sum(c.pids, processCpuMicros);
      firstStart = sum(first, processCpuMicros);
    }, windowStart - t0),
  );
  timers.push(
    setTimeout(() => {
      cpuEnd = sum(c.pids, processCpuMicros);
      firstEnd = sum(first, processCpuMicros);
    }, windowEnd - t0),
  );
  const rssTimer = setInterval(() => {
    const now = performance.now();
    if (now < windowStart || now > windowEnd) return;
    const rss = sum(c.pids, processRssBytes);
    if (rss !== undefined && (rssPeakBytes === undefined || rss > rssPeakBytes)) rssPeakBytes = rss;
  }, RSS_SAMPLE_MS);
  // Streams still open long after the window are cut and counted incomplete.
  const drainTimeoutMs = c.lifetimeMs * 4 + 30_000;
  const cut = setTimeout(
    () => {
      for (const req of live) req.destroy();
    },
    windowEnd - t0 + drainTimeoutMs,
  );
  await drained;
  for (const t of timers) clearTimeout(t);
  clearTimeout(cut);
  clearInterval(rssTimer);
  agent.destroy();
  const windowMs = Math.min(performance.now(), windowEnd) - windowStart;
  return {
    windowMs,
    ...result,
    chunksPerSec: (result.chunks * 1000) / windowMs,
    headersMs: headers.summary(),
    firstChunkMs: firstChunk.summary(),
    gapMs: gaps.summary(),
    ...(cpuStart !== undefined && cpuEnd !== undefined ? { cpuMicros: cpuEnd - cpuStart } : {}),
    ...(firstStart !== undefined && firstEnd !== undefined && c.pids.length > 1
      ? { cpuFirstMicros: firstEnd - firstStart }
      : {}),
    ...(rssIdleBytes === undefined ? {} : { rssIdleBytes }),
    ...(rssPeakBytes === undefined ? {} : { rssPeakBytes }),
  };
}
