import { pairView } from "../disaggregation/pd-body.js";
import { RouterError } from "../errors.js";
import type { TokenizeInput } from "../index/tokenize-input.js";
import type { PairView } from "../proxy/pair.js";
import { adapterOf, type Endpoint, modelOf, routingText } from "./routing-text.js";
import { isSinglePrompt } from "./single-prompt.js";
import { tokenizeInputOf } from "./tokenize-input.js";

/** What the router needs from a request body: the routing key and a few fields. */
export interface BodySummary {
  text: string;
  model: string | undefined;
  /** SGLang's `lora_path` as one adapter key (routing-text.ts adapterOf); separate KV per adapter. */
  adapter?: string | undefined;
  stream: boolean;
  /**
   * Whether the answer can carry the engine's token counts: any answer but an OpenAI chat or
   * completions stream without `stream_options.include_usage` (vLLM and SGLang send a stream's
   * usage only then: vllm/entrypoints/openai/serving_chat.py and serving_completion.py,
   * sglang/srt/entrypoints/openai/serving_chat.py; SGLang's /generate has meta_info in every
   * chunk). The relays search no chunk of the others.
   */
  answerHasUsage?: boolean | undefined;
  /** What the engine would tokenize (for the precise KV-event index); only when asked for. */
  tokenizeInput?: TokenizeInput | undefined;
  /**
   * One prompt, whole in `text` (not a batch, not cut at the routing-text limit): the usage its
   * engine reports is about this text (scheduling/usage-feedback.ts).
   */
  usageDescribesText: boolean;
  /** The OpenAI `user` field, when a string (session affinity by user, --session-affinity user). */
  user?: string | undefined;
  /** The output asked for (max_tokens, max_completion_tokens, SGLang's max_new_tokens), when given. */
  maxTokens?: number | undefined;
  /** Responses API: the stored response this request continues, when it names one. */
  previousResponseId?: string | undefined;
  /** What a prefill/decode pair needs of the body, when pairs are on (IntakeOptions.pairs). */
  pair?: PairView | undefined;
}

/** The prefill/decode protocol whose view of the body the summary carries (undefined: none). */
export type PairProtocolName = "sglang" | "vllm";

/**
 * Parses a JSON body once and extracts its summary. Pure and self-contained, so it runs the same
 * on the event loop (small bodies) and in a parse worker (large ones, see parse-pool.ts): it must
 * only return plain data and only throw RouterError.
 */
export function summarizeBody(
  endpoint: Endpoint,
  body: Uint8Array,
  maxRoutingTextChars: number,
  withTokenizeInput = false,
  pairs?: PairProtocolName,
): BodySummary {
  return summarizeParsed(
    endpoint,
    parseJsonObject(body),
    maxRoutingTextChars,
    withTokenizeInput,
    pairs,
  );
}

/** The summary of a body already parsed (parseJsonObject), for a caller that keeps the object. */
export function summarizeParsed(
  endpoint: Endpoint,
  parsed: Record<string, unknown>,
  maxRoutingTextChars: number,
  withTokenizeInput = false,
  pairs?: PairProtocolName,
): BodySummary {
  const text = routingText(endpoint, parsed, maxRoutingTextChars);
  return {
    text,
    model: modelOf(parsed),
    adapter: adapterOf(parsed),
    stream: parsed.stream === true,
    answerHasUsage:
      parsed.stream !== true ||
      (endpoint !== "chat" && endpoint !== "completions") ||
      includesUsage(parsed.stream_options),
    tokenizeInput: withTokenizeInput ? tokenizeInputOf(endpoint, parsed, text) : undefined,
    usageDescribesText: text.length < maxRoutingTextChars && isSinglePrompt(endpoint, parsed),
    user: typeof parsed.user === "string" ? parsed.user : undefined,
    maxTokens: maxTokensOf(parsed),
    previousResponseId:
      endpoint === "responses" && typeof parsed.previous_response_id === "string"
        ? parsed.previous_response_id
        : undefined,
    // Worked out here, where the body is parsed (a parse process for a large one), so the pair
    // never parses it again on the event loop.
    pair: pairs === undefined ? undefined : pairView(pairs, endpoint, parsed),
  };
}

/** The output a request asks for, as its engine reads it (admission counts it as work). */
function maxTokensOf(parsed: Record<string, unknown>): number | undefined {
  const asked =
    parsed.max_tokens ??
    parsed.max_output_tokens ??
    parsed.max_completion_tokens ??
    (parsed.sampling_params as Record<string, unknown> | undefined)?.max_new_tokens;
  return typeof asked === "number" && asked >= 0 && Number.isFinite(asked) ? asked : undefined;
}

/**
 * The body as a JSON object; a RouterError (invalid_json, invalid_request) when it is not one. Its
 * nesting was bounded as it was read (read-body.ts, BodyReadLimits.maxNesting), not again here.
 */
export function parseJsonObject(body: Uint8Array): Record<string, unknown> {
  let parsed: unknown;
  try {
    // Buffer.from over the same memory: no copy (works for shared memory too, unlike TextDecoder).
    parsed = JSON.parse(
      Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString("utf8"),
    );
  } catch (err) {
    throw new RouterError(
      "invalid_json",
      `Request body is not valid JSON: ${(err as Error).message}`,
    );
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new RouterError("invalid_request", "Request body must be a JSON object.");
  }
  return parsed as Record<string, unknown>;
}

/** `stream_options.include_usage: true` (OpenAI streams). */
function includesUsage(options: unknown): boolean {
  return (
    typeof options === "object" &&
    options !== null &&
    (options as { include_usage?: unknown }).include_usage === true
  );
}
