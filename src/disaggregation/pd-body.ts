/**
 * What a prefill/decode pair refuses before the router builds either side's body (400, naming the
 * field): the router multiplies or rewrites the client's body, so a small request must not make
 * it build a large one, and a body it would serialize again must be one JSON.stringify can take.
 *
 * - Batch size: SGLang's hand-off fields have one entry per item (bootstrap.ts), so `"n": 1000000`
 *   alone would build megabytes. Every per-item array is bounded by vLLM's own bound on `n`,
 *   VLLM_MAX_N_SEQUENCES (default 16384; vllm-project/vllm vllm/envs.py, checked in
 *   vllm/sampling_params.py SamplingParams._verify_args). SGLang's gateway has no bound of its
 *   own (sgl-model-gateway/src/routers/http/pd_router.rs, get_*_batch_size), so the same one
 *   applies there.
 * - vLLM's completions with a list of prompts: its prefill answers with the first prompt's
 *   kv_transfer_params only (vllm/entrypoints/openai/completion/serving.py,
 *   request_output_to_completion_response: `final_res_batch[0].kv_transfer_params`), so the
 *   decode side would recompute every other prompt. Refused: one prompt per request.
 * - Nesting deeper than MAX_NESTING_DEPTH anywhere in the body (the rewrite serializes it again).
 */
import { RouterError } from "../errors.js";
import { MAX_NESTING_DEPTH, nestsDeeperThan } from "../proxy/json-depth.js";
import type { PairView } from "../proxy/pair.js";
import { BOOTSTRAP_FIELDS, batchSize, type JsonObject } from "./bootstrap.js";
import { prefillBody } from "./vllm-transfer.js";

/** vLLM's VLLM_MAX_N_SEQUENCES default: the most items (choices, prompts, texts) of one request. */
export const MAX_PD_BATCH_ITEMS = 16_384;

/** The field that carries an endpoint's batch, as the client named it. */
function batchField(endpoint: string, body: JsonObject): string {
  if (endpoint === "chat") return "n";
  if (endpoint === "completions") return "prompt";
  return Array.isArray(body.text) ? "text" : "input_ids";
}

/** The request's refusal, or undefined when the pair can build its bodies. */
export function pdBodyRefusal(
  protocol: "sglang" | "vllm",
  endpoint: string,
  body: JsonObject,
): RouterError | undefined {
  const n = body.n;
  if (typeof n === "number" && n > MAX_PD_BATCH_ITEMS) {
    return refuse(`"n" must be at most ${MAX_PD_BATCH_ITEMS}, got ${n}.`);
  }
  const items = batchSize(endpoint, body);
  if (items !== undefined && items > MAX_PD_BATCH_ITEMS) {
    const field = batchField(endpoint, body);
    return refuse(
      `"${field}" has ${items} items; a prefill/decode pair takes at most ${MAX_PD_BATCH_ITEMS} in one request.`,
    );
  }
  if (protocol === "vllm" && endpoint === "completions" && items !== undefined && items > 1) {
    return refuse(
      `"prompt" is a list of ${items} prompts; under vLLM's prefill/decode disaggregation a completions request takes one prompt (vLLM's prefill hands over the first prompt's KV cache only): send one request per prompt.`,
    );
  }
  for (const [field, value] of Object.entries(body)) {
    if (nestsDeeperThan(value, MAX_NESTING_DEPTH - 1)) {
      return refuse(
        `"${field}" is nested deeper than ${MAX_NESTING_DEPTH} levels; no engine accepts that.`,
      );
    }
  }
  return undefined;
}

function refuse(message: string): RouterError {
  return new RouterError("invalid_request", message);
}

/**
 * What the pair needs of a parsed body (proxy/pair.ts PairView), worked out once where intake
 * parsed it: the refusal, or SGLang's batch size, vLLM's prefill body, and the client's body
 * serialized again without the fields the router sets, when the client sent one of them (a
 * splice in front could not replace it, and an engine keeps a duplicate's last value).
 */
export function pairView(
  protocol: "sglang" | "vllm",
  endpoint: string,
  body: JsonObject,
): PairView {
  const refused = pdBodyRefusal(protocol, endpoint, body);
  if (refused !== undefined) return { refusal: refused.message };
  if (protocol === "sglang") {
    return {
      batch: batchSize(endpoint, body),
      base: BOOTSTRAP_FIELDS.some((name) => Object.hasOwn(body, name))
        ? without(body, BOOTSTRAP_FIELDS)
        : undefined,
    };
  }
  return {
    prefill: prefillBody(body),
    base: Object.hasOwn(body, "kv_transfer_params")
      ? without(body, ["kv_transfer_params"])
      : undefined,
  };
}

/** The body serialized again without some of its fields. */
function without(body: JsonObject, names: readonly string[]): Buffer {
  const rest: JsonObject = {};
  for (const [name, value] of Object.entries(body)) if (!names.includes(name)) rest[name] = value;
  return Buffer.from(JSON.stringify(rest));
}
