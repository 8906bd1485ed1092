/**
 * bench:admission's load: the two request shapes, one streamed completion timed at the client
 * (time to first token, and the router's own queue wait read from --queue-wait-header), and open
 * loops of them.
 */

/** The response header the bench asks the router for (--queue-wait-header). */
export const QUEUE_WAIT_HEADER = "x-queue-wait-ms";

/** One kind of request: its prompt length, output, headers and, sent straight to an engine, its priority. */
export interface RequestShape {
  group: string;
  promptChars: number;
  maxTokens: number;
  headers: Record<string, string>;
  /** The body's `priority` (the engine's field and convention); absent when undefined. */
  priority?: number;
}

export const HEAVY = (headers: Record<string, string>): RequestShape => ({
  group: "A",
  promptChars: 4000,
  maxTokens: 96,
  headers,
});

export const LIGHT = (group: string, headers: Record<string, string>): RequestShape => ({
  group,
  promptChars: 400,
  maxTokens: 16,
  headers,
});

export interface Outcome {
  group: string;
  status: number | "error";
  ttftMs: number | undefined;
  /**
   * Time the request waited in the router's queue (its --queue-wait-header), ms; 0 for a request
   * sent straight to an engine; undefined when a router answer lacked the header.
   */
  routerWaitMs: number | undefined;
  tokens: number;
  retryAfter: boolean;
  /** When it was sent and when it ended, ms since the run started. */
  sentAt: number;
  endedAt: number;
  /** The engine that answered (the simulator's x-sim-worker-id, relayed); undefined if none. */
  worker: string | undefined;
}

let serial = 0;

/** Where a request goes: the router, or (the floor run) an engine directly. */
export interface Target {
  url: string;
  direct: boolean;
}

/** One streamed completion; resolves with its outcome, never throws. */
export async function send(
  target: Target,
  shape: RequestShape,
  startedAt: number,
): Promise<Outcome> {
  const sent = performance.now();
  const id = serial++;
  // Distinct prompts (no shared prefix across requests: the cache does not blur the comparison).
  const prompt = `${shape.group} ${id} `.padEnd(
    shape.promptChars,
    `${shape.group.toLowerCase()}x `,
  );
  let worker: string | undefined;
  const ended = (o: Omit<Outcome, "group" | "sentAt" | "endedAt" | "worker">): Outcome => ({
    group: shape.group,
    ...o,
    sentAt: sent - startedAt,
    endedAt: performance.now() - startedAt,
    worker,
  });
  try {
    const res = await fetch(`${target.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", ...shape.headers },
      body: JSON.stringify({
        model: "m",
        prompt,
        max_tokens: shape.maxTokens,
        stream: true,
        ...(shape.priority === undefined ? {} : { priority: shape.priority }),
      }),
    });
    worker = res.headers.get("x-sim-worker-id") ?? undefined;
    const header = res.headers.get(QUEUE_WAIT_HEADER);
    const routerWaitMs = target.direct ? 0 : header === null ? undefined : Number(header);
    if (res.status !== 200) {
      await res.text();
      return ended({
        status: res.status,
        ttftMs: undefined,
        routerWaitMs,
        tokens: 0,
        retryAfter: res.headers.get("retry-after") !== null,
      });
    }
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let ttftMs: number | undefined;
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      ttftMs ??= performance.now() - sent;
    }
    return ended({ status: 200, ttftMs, routerWaitMs, tokens: shape.maxTokens, retryAfter: false });
  } catch {
    return ended({
      status: "error",
      ttftMs: undefined,
      routerWaitMs: undefined,
      tokens: 0,
      retryAfter: false,
    });
  }
}

/**
 * Open loop: `rate` requests a second of `shape`, evenly spaced, for `secs`; request i goes to
 * targets[i mod n] (one target: all to it).
 */
export function stream(
  targets: readonly Target[],
  shape: RequestShape,
  rate: number,
  secs: number,
  startedAt: number,
  offsetMs = 0,
): Promise<Outcome[]> {
  const count = Math.floor(rate * secs);
  const gapMs = 1000 / rate;
  const sends: Promise<Outcome>[] = [];
  return new Promise((resolve) => {
    let i = 0;
    const next = () => {
      if (i >= count) {
        resolve(Promise.all(sends));
        return;
      }
      sends.push(send(targets[i % targets.length] as Target, shape, startedAt));
      i += 1;
      const due = offsetMs + i * gapMs - (performance.now() - startedAt);
      setTimeout(next, Math.max(0, due));
    };
    setTimeout(next, offsetMs);
  });
}
