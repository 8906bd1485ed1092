/**
 * Response bodies in the shapes vLLM and SGLang produce: OpenAI chat/completion objects and their
 * stream chunks, SGLang /generate objects, embeddings, and the OpenAI error object.
 */
import { fmix32 } from "../src/hash/fmix32.js";
import { FNV_OFFSET, FNV_PRIME } from "./hash.js";
import type { InferenceJob } from "./protocol.js";

/** One generated sequence (a choice) and its accounting. */
export interface SequenceResult {
  /** Choice index: promptIndex × n + sample. */
  index: number;
  promptIndex: number;
  promptTokens: number;
  cachedTokens: number;
  generated: number;
  maxTokens: number;
}

/** What identifies one response. */
export interface ResponseMeta {
  id: string;
  created: number;
  model: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

/** OpenAI usage. Prompt tokens count once per prompt even with n > 1, as vLLM reports them. */
export function usageOf(seqs: readonly SequenceResult[], n: number): Usage {
  let prompt = 0;
  let cached = 0;
  let completion = 0;
  for (const s of seqs) {
    completion += s.generated;
    if (s.index % n === 0) {
      prompt += s.promptTokens;
      cached += s.cachedTokens;
    }
  }
  return {
    prompt_tokens: prompt,
    completion_tokens: completion,
    total_tokens: prompt + completion,
    prompt_tokens_details: { cached_tokens: cached },
  };
}

/** Always "length": the simulated model never emits an end-of-sequence token. */
export const FINISH_REASON = "length";

export function chatCompletion(
  meta: ResponseMeta,
  seqs: readonly SequenceResult[],
  n: number,
  text: (s: SequenceResult) => string,
) {
  return {
    id: meta.id,
    object: "chat.completion",
    created: meta.created,
    model: meta.model,
    choices: seqs.map((s) => ({
      index: s.index,
      message: { role: "assistant", content: text(s), tool_calls: [] },
      logprobs: null,
      finish_reason: FINISH_REASON,
      stop_reason: null,
    })),
    usage: usageOf(seqs, n),
  };
}

export function chatChunk(
  meta: ResponseMeta,
  index: number,
  delta: { role?: string; content: string } | Record<string, never>,
  finishReason: string | null,
  includeUsage: boolean,
) {
  return {
    id: meta.id,
    object: "chat.completion.chunk",
    created: meta.created,
    model: meta.model,
    choices: [{ index, delta, logprobs: null, finish_reason: finishReason }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

export function textCompletion(
  meta: ResponseMeta,
  seqs: readonly SequenceResult[],
  n: number,
  text: (s: SequenceResult) => string,
) {
  return {
    id: meta.id,
    object: "text_completion",
    created: meta.created,
    model: meta.model,
    choices: seqs.map((s) => ({
      index: s.index,
      text: text(s),
      logprobs: null,
      finish_reason: FINISH_REASON,
      stop_reason: null,
    })),
    usage: usageOf(seqs, n),
  };
}

export function completionChunk(
  meta: ResponseMeta,
  index: number,
  text: string,
  finishReason: string | null,
  includeUsage: boolean,
) {
  return {
    id: meta.id,
    object: "text_completion",
    created: meta.created,
    model: meta.model,
    choices: [{ index, text, logprobs: null, finish_reason: finishReason, stop_reason: null }],
    ...(includeUsage ? { usage: null } : {}),
  };
}

/** The final chunk of an OpenAI stream with stream_options.include_usage. */
export function usageChunk(meta: ResponseMeta, object: string, usage: Usage) {
  return { id: meta.id, object, created: meta.created, model: meta.model, choices: [], usage };
}

/** SGLang /generate: one object per sequence (`text` cumulative in streams). */
export function generateObject(
  id: string,
  s: SequenceResult,
  text: string,
  outputIds: number[],
  finished: boolean,
  e2eLatencySec: number,
  index: number | undefined,
) {
  return {
    text,
    output_ids: outputIds,
    meta_info: {
      id,
      finish_reason: finished ? { type: FINISH_REASON, length: s.generated } : null,
      prompt_tokens: s.promptTokens,
      completion_tokens: s.generated,
      cached_tokens: s.cachedTokens,
      e2e_latency: e2eLatencySec,
    },
    ...(index !== undefined ? { index } : {}),
  };
}

export function embeddingsList(
  meta: ResponseMeta,
  job: InferenceJob,
  seqs: readonly SequenceResult[],
  dim: number,
) {
  let promptTokens = 0;
  for (const s of seqs) promptTokens += s.promptTokens;
  return {
    id: meta.id,
    object: "list",
    created: meta.created,
    model: meta.model,
    data: seqs.map((s) => {
      const vector = fakeEmbedding(job.prompts[s.promptIndex] as number[], dim);
      return {
        object: "embedding",
        index: s.index,
        embedding:
          job.encodingFormat === "base64"
            ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString("base64")
            : Array.from(vector),
      };
    }),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0 },
  };
}

/** A deterministic unit vector derived from the token ids: equal prompts, equal embeddings. */
function fakeEmbedding(tokens: readonly number[], dim: number): Float32Array {
  let digest = FNV_OFFSET;
  for (const t of tokens) digest = Math.imul(digest ^ t, FNV_PRIME);
  const v = new Float32Array(dim);
  let norm = 0;
  for (let d = 0; d < dim; d++) {
    const x = fmix32(digest ^ Math.imul(d + 1, 0x9e3779b9)) / 2 ** 31 - 1;
    v[d] = x;
    norm += x * x;
  }
  const scale = norm > 0 ? 1 / Math.sqrt(norm) : 0;
  for (let d = 0; d < dim; d++) v[d] = (v[d] as number) * scale;
  return v;
}

/** OpenAI-shaped error body with vLLM's type names. */
export function errorBody(status: number, message: string, param: string | null = null) {
  return { error: { message, type: errorType(status), param, code: status } };
}

function errorType(status: number): string {
  if (status === 400) return "BadRequestError";
  if (status === 404) return "NotFoundError";
  if (status === 413) return "RequestEntityTooLarge";
  if (status === 429) return "RateLimitError";
  if (status === 503) return "ServiceUnavailableError";
  if (status >= 500) return "InternalServerError";
  return "Error";
}
