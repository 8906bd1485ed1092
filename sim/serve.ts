/**
 * Serving one validated inference job: submit its sequences to the engine and answer, either as
 * one JSON body at the end or as a server-sent-event stream with one chunk per generated token.
 * If the client goes away first, every sequence is aborted (freeing batch slots and KV pins).
 */
import type { ServerResponse } from "node:http";
import type { Engine, SequenceHandle } from "./engine.js";
import { generatedText, generatedTokenIds, generatedTokenText } from "./output-text.js";
import type { InferenceJob } from "./protocol.js";
import {
  chatChunk,
  chatCompletion,
  completionChunk,
  embeddingsList,
  errorBody,
  FINISH_REASON,
  generateObject,
  type ResponseMeta,
  type SequenceResult,
  textCompletion,
  usageChunk,
  usageOf,
} from "./responses.js";
import { type ResponseEcho, responseEvent, responseObject } from "./responses-api.js";

/** Counters a worker keeps; serveJob updates them. */
export interface ServeCounters {
  completed: number;
  aborted: number;
  crashed: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

export interface ServeContext {
  readonly engine: Engine;
  readonly counters: ServeCounters;
  readonly embeddingDim: number;
  /** Token chunks after which a stream's socket is destroyed (fault knob), or null. */
  readonly crashAfterChunks: number | null;
  /** A fresh response id with the given prefix. */
  nextId(prefix: string): string;
  /** Told once whether the job was answered in full (true) or not (prefill/decode hand-off). */
  onSettled?(ok: boolean): void;
  /** Fields added to a non-streaming JSON answer (a vLLM prefill's kv_transfer_params). */
  extraFields?: Record<string, unknown>;
  /** A Responses job: what its object echoes, and where a completed response is stored. */
  responses?: { echo: ResponseEcho; completed(id: string, text: string): void };
}

interface Tracked {
  result: SequenceResult;
  handle: SequenceHandle | undefined;
}

/**
 * SSE is written by hand here, not with hono's streamSSE: the simulator serves raw node:http
 * responses (no Hono context), and its fault knobs need the bare socket: crash after N chunks
 * (destroy mid-event), stall between chunks, honour back-pressure per write. The format itself is
 * the engines' one line per event, `data: <json>` and a blank line, ending with `data: [DONE]`.
 */
export const SSE_HEADERS = {
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
};

const ID_PREFIX = {
  chat: "chatcmpl-",
  completions: "cmpl-",
  generate: "",
  embeddings: "embd-",
  responses: "resp_",
};

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(payload),
  });
  res.end(payload);
}

export function serveJob(ctx: ServeContext, job: InferenceJob, res: ServerResponse): void {
  const meta: ResponseMeta = {
    id: ctx.nextId(ID_PREFIX[job.endpoint]),
    created: Math.floor(Date.now() / 1000),
    model: job.model,
  };
  const startedAt = performance.now();
  const streaming = job.stream && job.endpoint !== "embeddings";
  const crashAfter = streaming ? ctx.crashAfterChunks : null;
  const tracked: Tracked[] = [];
  job.prompts.forEach((prompt, promptIndex) => {
    for (let j = 0; j < job.n; j++) {
      tracked.push({
        result: {
          index: promptIndex * job.n + j,
          promptIndex,
          promptTokens: prompt.length,
          cachedTokens: 0,
          generated: 0,
          maxTokens: job.maxTokens,
        },
        handle: undefined,
      });
    }
  });
  let remaining = tracked.length;
  let chunks = 0;
  /** Responses streams number their events. */
  let events = 0;
  let settled = false;

  const abortAll = () => {
    for (const t of tracked) t.handle?.abort();
  };
  const write = (payload: unknown) => {
    res.write(`data: ${JSON.stringify(payload)}\n\n`);
    chunks++;
  };
  const crash = () => {
    settled = true;
    ctx.onSettled?.(false);
    ctx.counters.crashed++;
    abortAll();
    // Drop the connection once the chunks already written have left: in the tick of the crash the
    // response may still be corked, and destroy() would silently discard them, so a "mid-stream"
    // crash would look to the router like a crash before the first token.
    const socket = res.socket;
    if (socket === null || socket.destroyed) return;
    socket.write("", () => socket.destroy());
  };
  const rid = (t: Tracked) => job.rid?.[t.result.promptIndex] ?? `${meta.id}-${t.result.index}`;
  const seconds = () => (performance.now() - startedAt) / 1000;

  const onToken = (t: Tracked, i: number) => {
    t.result.generated = i + 1;
    ctx.counters.completionTokens++;
    if (!streaming || settled) return;
    const last = i + 1 === job.maxTokens;
    const index = t.result.index;
    const finish = last ? FINISH_REASON : null;
    if (job.endpoint === "chat") {
      if (i === 0) {
        res.write(
          `data: ${JSON.stringify(chatChunk(meta, index, { role: "assistant", content: "" }, null, job.includeUsage))}\n\n`,
        );
      }
      write(chatChunk(meta, index, { content: generatedTokenText(i) }, finish, job.includeUsage));
    } else if (job.endpoint === "completions") {
      write(completionChunk(meta, index, generatedTokenText(i), finish, job.includeUsage));
    } else if (job.endpoint === "responses") {
      res.write(
        responseEvent("response.output_text.delta", ++events, {
          item_id: `msg_${meta.id.slice(5)}`,
          output_index: 0,
          content_index: 0,
          delta: generatedTokenText(i),
        }),
      );
      chunks++;
    } else {
      const batchIndex = job.batch ? index : undefined;
      write(
        generateObject(rid(t), t.result, generatedText(i + 1), [], last, seconds(), batchIndex),
      );
    }
    if (crashAfter !== null && chunks >= crashAfter) crash();
  };

  const complete = () => {
    settled = true;
    ctx.counters.completed++;
    ctx.onSettled?.(true);
    const results = tracked.map((t) => t.result);
    const responses = ctx.responses;
    if (responses !== undefined) {
      const first = results[0] as SequenceResult;
      responses.completed(meta.id, generatedText(first.generated));
      const object = responseObject(
        meta,
        first,
        generatedText(first.generated),
        responses.echo,
        "completed",
      );
      if (!streaming) return sendJson(res, 200, object);
      res.end(responseEvent("response.completed", ++events, { response: object }));
      return;
    }
    if (!streaming) {
      const body = finalBody(ctx, job, meta, tracked, rid, seconds());
      const extra = ctx.extraFields;
      const whole =
        extra !== undefined && !Array.isArray(body) ? { ...(body as object), ...extra } : body;
      sendJson(res, 200, whole);
      return;
    }
    if (job.endpoint === "generate") {
      // A prefill-only sequence (max_new_tokens = 0) produced no token chunk: report it now.
      for (const t of tracked) {
        if (t.result.generated === 0) {
          write(
            generateObject(
              rid(t),
              t.result,
              "",
              [],
              true,
              seconds(),
              job.batch ? t.result.index : undefined,
            ),
          );
        }
      }
    } else if (job.includeUsage) {
      const object = job.endpoint === "chat" ? "chat.completion.chunk" : "text_completion";
      res.write(`data: ${JSON.stringify(usageChunk(meta, object, usageOf(results, job.n)))}\n\n`);
    }
    res.end("data: [DONE]\n\n");
  };

  res.on("close", () => {
    if (settled) return;
    settled = true;
    ctx.onSettled?.(false);
    abortAll();
    ctx.counters.aborted++;
  });

  if (streaming) {
    // An SGLang decode worker sent its stream's headers before the hand-off (sim/pd-side.ts).
    if (!res.headersSent) res.writeHead(200, SSE_HEADERS);
    const responses = ctx.responses;
    if (responses !== undefined) {
      const first = tracked[0]?.result as SequenceResult;
      const object = responseObject(meta, first, "", responses.echo, "in_progress");
      res.write(responseEvent("response.created", events, { response: object }));
    }
    res.flushHeaders();
    if (crashAfter === 0) {
      crash();
      return;
    }
  }
  for (const t of tracked) {
    if (settled) break;
    const prompt = job.prompts[t.result.promptIndex] as number[];
    try {
      t.handle = ctx.engine.submit({
        promptTokens: prompt,
        maxTokens: job.maxTokens,
        priority: job.priority ?? 0,
        sink: {
          onAdmit: (cached) => {
            t.result.cachedTokens = cached;
            ctx.counters.promptTokens += prompt.length;
            ctx.counters.cachedTokens += cached;
          },
          onToken: (i) => onToken(t, i),
          onFinish: () => {
            if (--remaining === 0 && !settled) complete();
          },
        },
      });
    } catch (err) {
      // Only when the worker is shutting down (the engine refuses new work).
      settled = true;
      ctx.onSettled?.(false);
      abortAll();
      if (res.headersSent) res.socket?.destroy();
      else sendJson(res, 503, errorBody(503, `simulated engine unavailable: ${String(err)}`));
      return;
    }
  }
}

function finalBody(
  ctx: ServeContext,
  job: InferenceJob,
  meta: ResponseMeta,
  tracked: readonly Tracked[],
  rid: (t: Tracked) => string,
  seconds: number,
): unknown {
  const results = tracked.map((t) => t.result);
  const text = (s: SequenceResult) => generatedText(s.generated);
  switch (job.endpoint) {
    case "chat":
      return chatCompletion(meta, results, job.n, text);
    case "completions":
      return textCompletion(meta, results, job.n, text);
    case "embeddings":
      return embeddingsList(meta, job, results, ctx.embeddingDim);
    case "generate": {
      const objects = tracked.map((t) =>
        generateObject(
          rid(t),
          t.result,
          text(t.result),
          generatedTokenIds(t.result.generated),
          true,
          seconds,
          undefined,
        ),
      );
      return job.batch ? objects : objects[0];
    }
  }
}
