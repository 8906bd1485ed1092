/**
 * The load client of the benchmarks: sends prepared OpenAI requests over undici with keep-alive,
 * measures each at the client (time to the first streamed content chunk, end to end, output
 * tokens), and drives a list of them closed-loop (fixed concurrency) or open-loop (given gaps).
 */
import { Agent, type Dispatcher } from "undici";

/** One prepared HTTP request. */
export interface LoadRequest {
  /** Scheme, host and port, e.g. http://127.0.0.1:30000 */
  origin: string;
  path: string;
  /** The serialized JSON body. */
  body: string;
  /** Whether the body asks for an SSE stream. */
  stream: boolean;
}

export interface RequestOutcome {
  ok: boolean;
  status: number;
  /** Time to the first chunk carrying generated text (streams only; NaN otherwise or on error). */
  ttftMs: number;
  /** Request sent → response complete. */
  e2eMs: number;
  outputTokens: number;
  /** usage.prompt_tokens and prompt_tokens_details.cached_tokens of the answer, when it reports them. */
  promptTokens?: number;
  cachedTokens?: number;
  /** x-sim-worker-id of the worker that answered, when present. */
  workerId: string | undefined;
  error: string | undefined;
}

/** A keep-alive connection pool per origin, enough connections for `concurrency` requests. */
export function loadAgent(concurrency: number): Agent {
  return new Agent({
    connections: Math.max(1, concurrency),
    keepAliveTimeout: 60_000,
    keepAliveMaxTimeout: 600_000,
    // Long prefills under heavy queueing are legitimate; the run itself is bounded.
    headersTimeout: 600_000,
    bodyTimeout: 600_000,
  });
}

/** Send one request and measure it. Never throws: failures come back as `ok: false`. */
export async function sendRequest(
  dispatcher: Dispatcher,
  req: LoadRequest,
): Promise<RequestOutcome> {
  const start = performance.now();
  const outcome: RequestOutcome = {
    ok: false,
    status: 0,
    ttftMs: Number.NaN,
    e2eMs: Number.NaN,
    outputTokens: 0,
    workerId: undefined,
    error: undefined,
  };
  try {
    const res = await dispatcher.request({
      origin: req.origin,
      path: req.path,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: req.body,
    });
    outcome.status = res.statusCode;
    const worker = res.headers["x-sim-worker-id"];
    outcome.workerId = typeof worker === "string" ? worker : undefined;
    if (res.statusCode !== 200) {
      outcome.error = `HTTP ${res.statusCode}: ${(await res.body.text()).slice(0, 200)}`;
    } else if (req.stream) {
      await readStream(res.body, start, outcome);
    } else {
      const json = (await res.body.json()) as { usage?: { completion_tokens?: number } };
      outcome.outputTokens = json.usage?.completion_tokens ?? 0;
      outcome.ok = true;
    }
  } catch (err) {
    outcome.error = (err as Error).message;
  }
  outcome.e2eMs = performance.now() - start;
  return outcome;
}

interface StreamChunk {
  choices?: { delta?: { content?: string | null }; text?: string | null }[];
  usage?: {
    completion_tokens?: number;
    prompt_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
}

/** Read an OpenAI SSE stream: first content chunk time, output tokens, [DONE] seen. */
async function readStream(
  body: AsyncIterable<Buffer>,
  start: number,
  outcome: RequestOutcome,
): Promise<void> {
  const decoder = new TextDecoder();
  let buffer = "";
  let contentChunks = 0;
  let usageTokens: number | undefined;
  let done = false;
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (!event.startsWith("data: ")) continue;
      const data = event.slice(6);
      if (data === "[DONE]") {
        done = true;
        continue;
      }
      const parsed = JSON.parse(data) as StreamChunk;
      const choice = parsed.choices?.[0];
      const text = choice?.delta?.content ?? choice?.text ?? "";
      if (text !== "") {
        if (contentChunks === 0) outcome.ttftMs = performance.now() - start;
        contentChunks++;
      }
      const usage = parsed.usage;
      if (typeof usage?.completion_tokens === "number") usageTokens = usage.completion_tokens;
      if (typeof usage?.prompt_tokens === "number") outcome.promptTokens = usage.prompt_tokens;
      const cached = usage?.prompt_tokens_details?.cached_tokens;
      if (typeof cached === "number") outcome.cachedTokens = cached;
    }
  }
  outcome.outputTokens = usageTokens ?? contentChunks;
  if (done) outcome.ok = true;
  else outcome.error = "stream ended without [DONE]";
}

/** A request of a run, optionally waiting for another one (the previous turn of its chat). */
export interface LoadJob {
  key: string;
  /** Key of a job that must complete before this one is sent (a user waits for the reply). */
  after?: string;
  request: LoadRequest;
}

export interface LoadRunOptions {
  dispatcher: Dispatcher;
  /** Closed loop: requests outstanding at once. */
  concurrency: number;
  /** Open loop: gap before each request, ms (one per job); overrides the closed loop. */
  gapsMs?: readonly number[];
  /** Called after each request completes. */
  onDone?: (outcome: RequestOutcome, job: LoadJob) => void;
}

export interface LoadRun {
  /** In job order. */
  outcomes: RequestOutcome[];
  /** First request sent → last response complete. */
  wallMs: number;
}

export async function runLoad(jobs: readonly LoadJob[], o: LoadRunOptions): Promise<LoadRun> {
  const outcomes = new Array<RequestOutcome>(jobs.length);
  const finished = new Map<string, Promise<void>>();
  const settle = new Map<string, () => void>();
  for (const job of jobs) {
    finished.set(job.key, new Promise<void>((resolve) => settle.set(job.key, resolve)));
  }
  const run = async (i: number) => {
    const job = jobs[i]!;
    if (job.after !== undefined) await finished.get(job.after);
    const outcome = await sendRequest(o.dispatcher, job.request);
    outcomes[i] = outcome;
    settle.get(job.key)?.();
    o.onDone?.(outcome, job);
  };

  const start = performance.now();
  if (o.gapsMs !== undefined) {
    const gaps = o.gapsMs;
    const pending: Promise<void>[] = [];
    let at = start;
    for (let i = 0; i < jobs.length; i++) {
      at += gaps[i] ?? 0;
      const wait = at - performance.now();
      if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait));
      pending.push(run(i));
    }
    await Promise.all(pending);
  } else {
    let next = 0;
    const lane = async () => {
      while (next < jobs.length) await run(next++);
    };
    await Promise.all(Array.from({ length: Math.min(o.concurrency, jobs.length) }, lane));
  }
  return { outcomes, wallMs: performance.now() - start };
}
