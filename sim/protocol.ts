/**
 * Request bodies of the inference endpoints, as vLLM and SGLang accept them, turned into one
 * normalized job: the prompts as the engine tokenizes them, the output length, streaming options.
 * Anything malformed throws BadRequest, answered with 400 and an OpenAI-shaped error.
 */
import { imageText, imageUrlOf } from "./media.js";
import { type ChatMessage, renderChat } from "./template.js";
import { isTokenId, tokenize } from "./tokenizer.js";

export type InferenceEndpoint = "chat" | "completions" | "generate" | "embeddings" | "responses";

export interface InferenceJob {
  endpoint: InferenceEndpoint;
  /** The body's `priority`, read by the engine only with priority scheduling (default 0). */
  priority?: number;
  model: string;
  /** The LoRA adapter it runs with (inference-job.ts applyModelChoice), when one. */
  adapter?: string;
  /** Token ids of each prompt, as the engine prefills them. */
  prompts: number[][];
  /** Choices per prompt (OpenAI `n`). */
  n: number;
  /** Output tokens per sequence; 0 for embeddings. */
  maxTokens: number;
  stream: boolean;
  /** stream_options.include_usage (OpenAI streams). */
  includeUsage: boolean;
  /** The request sent a list of inputs (SGLang /generate and embeddings answer with a list). */
  batch: boolean;
  /** SGLang request id(s), echoed in meta_info.id. */
  rid: string[] | undefined;
  /** Embeddings: "float" or "base64". */
  encodingFormat: "float" | "base64";
}

export interface ParseLimits {
  defaultMaxTokens: number;
  maxModelLen: number;
  model: string;
  /** The engine's tokenizer (default: the stand-in, which adds no special tokens). */
  tokenize?: SimTokenize;
}

/**
 * Text → token ids. Special tokens as vLLM adds them: for a prompt string yes (completions,
 * TokenizeCompletionRequest), for a rendered chat no (the template holds them; ChatCompletionRequest
 * and TokenizeChatRequest default add_special_tokens to false; vllm/entrypoints/openai/protocol.py).
 */
export type SimTokenize = (text: string, addSpecialTokens: boolean) => number[];

const standIn: SimTokenize = (text) => tokenize(text);

/** Most sequences (prompts × n) in one request: a bound, like every other. */
const MAX_SEQUENCES_PER_REQUEST = 1024;

export class BadRequest extends Error {
  constructor(
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = "BadRequest";
  }
}

type Json = Record<string, unknown>;

export function parseJob(
  endpoint: InferenceEndpoint,
  body: unknown,
  limits: ParseLimits,
): InferenceJob {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new BadRequest("request body must be a JSON object");
  }
  const b = body as Json;
  const job: InferenceJob = {
    endpoint,
    model: typeof b.model === "string" && b.model.length > 0 ? b.model : limits.model,
    prompts: [],
    n: 1,
    maxTokens: 0,
    stream: false,
    includeUsage: false,
    batch: false,
    rid: undefined,
    encodingFormat: "float",
  };
  switch (endpoint) {
    case "chat":
      parseChat(b, job, limits);
      break;
    case "completions":
      parseCompletions(b, job, limits);
      break;
    case "generate":
      parseGenerate(b, job, limits);
      break;
    case "embeddings":
      parseEmbeddings(b, job, limits);
      break;
    case "responses":
      // The worker turned the Responses body into its chat first (responses-api.ts).
      parseChat(b, job, limits);
      break;
  }
  if (job.prompts.length * job.n > MAX_SEQUENCES_PER_REQUEST) {
    throw new BadRequest(
      `at most ${MAX_SEQUENCES_PER_REQUEST} sequences (prompts × n) per request`,
    );
  }
  for (const prompt of job.prompts) {
    if (prompt.length === 0) throw new BadRequest("The prompt cannot be empty.", "prompt");
    const total = prompt.length + job.maxTokens;
    if (total > limits.maxModelLen) {
      throw new BadRequest(
        `This model's maximum context length is ${limits.maxModelLen} tokens. However, you ` +
          `requested ${total} tokens (${prompt.length} in the messages, ${job.maxTokens} in the ` +
          "completion). Please reduce the length of the messages or completion.",
      );
    }
  }
  return job;
}

function parseChat(b: Json, job: InferenceJob, limits: ParseLimits): void {
  if (!Array.isArray(b.messages) || b.messages.length === 0) {
    throw new BadRequest("messages must be a non-empty array", "messages");
  }
  const messages: ChatMessage[] = b.messages.map((m, i) => chatMessage(m, i));
  const addGenerationPrompt = optionalBool(b, "add_generation_prompt") ?? true;
  job.prompts = [(limits.tokenize ?? standIn)(renderChat(messages, addGenerationPrompt), false)];
  job.maxTokens =
    outputLength(b, "max_completion_tokens", 1) ??
    outputLength(b, "max_tokens", 1) ??
    limits.defaultMaxTokens;
  minTokensWithin(b, "min_tokens", job.maxTokens);
  job.n = choices(b);
  parseStreaming(b, job);
}

function chatMessage(value: unknown, i: number): ChatMessage {
  if (value === null || typeof value !== "object") {
    throw new BadRequest(`messages[${i}] must be an object`, "messages");
  }
  const m = value as Json;
  if (typeof m.role !== "string" || m.role.length === 0) {
    throw new BadRequest(`messages[${i}].role must be a non-empty string`, "messages");
  }
  let content: string;
  if (typeof m.content === "string") content = m.content;
  else if (m.content === null || m.content === undefined) content = "";
  else if (Array.isArray(m.content))
    content = imageParts(m.content, true) + textParts(m.content, i);
  else throw new BadRequest(`messages[${i}].content must be a string or an array`, "messages");
  if (Array.isArray(m.tool_calls)) content += toolCallsText(m.tool_calls);
  return { role: m.role, content };
}

/**
 * The message's images as the prompt holds them, ahead of its text (vLLM, for a template that
 * takes content as a string, puts a message's placeholders before its text:
 * vllm/entrypoints/chat_utils.py); `keyed`: derived from each image's content (media.ts).
 */
export function imageParts(parts: unknown[], keyed: boolean): string {
  let out = "";
  for (const part of parts) {
    if (part === null || typeof part !== "object") continue;
    const url = imageUrlOf(part as Json);
    if (url !== undefined) out += imageText(url, keyed);
  }
  return out;
}

/** Text parts of multi-part content, joined by newlines; other parts are skipped. */
function textParts(parts: unknown[], i: number): string {
  const texts: string[] = [];
  for (const part of parts) {
    if (part === null || typeof part !== "object") {
      throw new BadRequest(`messages[${i}].content parts must be objects`, "messages");
    }
    const p = part as Json;
    if (p.type === "text") {
      if (typeof p.text !== "string") {
        throw new BadRequest(`messages[${i}] text part needs a string "text"`, "messages");
      }
      texts.push(p.text);
    }
  }
  return texts.join("\n");
}

function toolCallsText(calls: unknown[]): string {
  let out = "";
  for (const call of calls) {
    const fn = call !== null && typeof call === "object" ? (call as Json).function : undefined;
    if (fn === null || typeof fn !== "object") continue;
    const { name, arguments: args } = fn as Json;
    out += `<tool_call>${typeof name === "string" ? name : ""}(${typeof args === "string" ? args : ""})`;
  }
  return out;
}

function parseCompletions(b: Json, job: InferenceJob, limits: ParseLimits): void {
  const { prompts } = promptList(b.prompt, "prompt", limits.tokenize);
  job.prompts = prompts;
  job.maxTokens = outputLength(b, "max_tokens", 1) ?? limits.defaultMaxTokens;
  minTokensWithin(b, "min_tokens", job.maxTokens);
  job.n = choices(b);
  parseStreaming(b, job);
}

function parseGenerate(b: Json, job: InferenceJob, limits: ParseLimits): void {
  const hasText = b.text !== undefined && b.text !== null;
  const hasIds = b.input_ids !== undefined && b.input_ids !== null;
  if (hasText === hasIds) throw new BadRequest("Either text or input_ids should be provided.");
  const { prompts, batch } = hasText
    ? promptList(b.text, "text", limits.tokenize, "strings")
    : promptList(b.input_ids, "input_ids", limits.tokenize, "ids");
  job.prompts = prompts;
  job.batch = batch;
  const sp = b.sampling_params;
  if (sp !== undefined && sp !== null && (typeof sp !== "object" || Array.isArray(sp))) {
    throw new BadRequest("sampling_params must be an object", "sampling_params");
  }
  const params = (sp ?? {}) as Json;
  // SGLang accepts max_new_tokens = 0 (prefill only).
  job.maxTokens = outputLength(params, "max_new_tokens", 0) ?? limits.defaultMaxTokens;
  minTokensWithin(params, "min_new_tokens", job.maxTokens);
  job.stream = optionalBool(b, "stream") ?? false;
  if (typeof b.rid === "string") job.rid = [b.rid];
  else if (Array.isArray(b.rid) && b.rid.every((r) => typeof r === "string")) {
    job.rid = b.rid as string[];
  }
}

function parseEmbeddings(b: Json, job: InferenceJob, limits: ParseLimits): void {
  const { prompts, batch } = promptList(b.input, "input", limits.tokenize);
  job.prompts = prompts;
  job.batch = batch;
  job.maxTokens = 0;
  const format = b.encoding_format;
  if (format !== undefined && format !== null && format !== "float" && format !== "base64") {
    throw new BadRequest('encoding_format must be "float" or "base64"', "encoding_format");
  }
  job.encodingFormat = format === "base64" ? "base64" : "float";
}

/** string | string[] | token ids | token-id lists → token ids per prompt. */
function promptList(
  value: unknown,
  param: string,
  encode: SimTokenize = standIn,
  accept: "any" | "strings" | "ids" = "any",
): { prompts: number[][]; batch: boolean } {
  if (typeof value === "string" && accept !== "ids")
    return { prompts: [encode(value, true)], batch: false };
  if (Array.isArray(value) && value.length > 0) {
    if (value.every((v) => typeof v === "string") && accept !== "ids") {
      return { prompts: value.map((v) => encode(v as string, true)), batch: true };
    }
    if (value.every(isTokenId) && accept !== "strings") {
      return { prompts: [value as number[]], batch: false };
    }
    if (value.every((v) => Array.isArray(v) && v.every(isTokenId)) && accept !== "strings") {
      return { prompts: value as number[][], batch: true };
    }
  }
  const kinds =
    accept === "strings"
      ? "a string or a non-empty list of strings"
      : accept === "ids"
        ? "a non-empty list of token ids or of token-id lists"
        : "a string, a list of strings, a list of token ids or a list of token-id lists";
  throw new BadRequest(
    `${param} must be ${kinds} (token ids are integers in the vocabulary)`,
    param,
  );
}

function outputLength(b: Json, key: string, min: number): number | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isInteger(v) || v < min) {
    throw new BadRequest(`${key} must be an integer >= ${min}, got ${JSON.stringify(v)}`, key);
  }
  return v;
}

/**
 * Both engines refuse a minimum output above the maximum: vLLM's SamplingParams._verify_args
 * (vllm/sampling_params.py) and SGLang's SamplingParams.verify
 * (python/sglang/srt/sampling/sampling_params.py), each with its own wording.
 */
function minTokensWithin(b: Json, key: "min_tokens" | "min_new_tokens", maxTokens: number): void {
  const min = outputLength(b, key, 0);
  if (min === undefined || min <= maxTokens) return;
  throw new BadRequest(
    key === "min_tokens"
      ? `min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${min}.`
      : `min_new_tokens must be in [0, max_new_tokens(${maxTokens})], got ${min}.`,
    key,
  );
}

function choices(b: Json): number {
  const v = b.n;
  if (v === undefined || v === null) return 1;
  if (typeof v !== "number" || !Number.isInteger(v) || v < 1) {
    throw new BadRequest(`n must be an integer >= 1, got ${JSON.stringify(v)}`, "n");
  }
  return v;
}

function parseStreaming(b: Json, job: InferenceJob): void {
  job.stream = optionalBool(b, "stream") ?? false;
  const so = b.stream_options;
  if (so === undefined || so === null) return;
  if (typeof so !== "object" || Array.isArray(so)) {
    throw new BadRequest("stream_options must be an object", "stream_options");
  }
  if (!job.stream) throw new BadRequest("Stream options can only be defined when `stream=True`.");
  job.includeUsage = optionalBool(so as Json, "include_usage") ?? false;
}

function optionalBool(b: Json, key: string): boolean | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw new BadRequest(`${key} must be a boolean`, key);
  return v;
}
