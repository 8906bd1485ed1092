/**
 * The models a simulated worker serves: one base model under one or more served names, plus LoRA
 * adapters. What a request's `model` selects, and the /v1/models list, follow each engine:
 * - vLLM lists every served name and every adapter (an adapter's `parent` is the base name, its
 *   `root` the adapter path: vllm/entrypoints/openai/serving_models.py, show_available_models)
 *   and answers 404 for any other non-empty name, `{"error": {"message": "The model `x` does not
 *   exist.", "type": "NotFoundError", "param": "model", "code": 404}}`
 *   (vllm/entrypoints/openai/engine/serving.py: `_check_model`, `create_error_response`); an
 *   absent or empty `model` is the base model (`_is_model_supported`).
 * - SGLang lists its one served name only (python/sglang/srt/entrypoints/http_server.py,
 *   available_models), runs its model whatever the name of a base request (no model check in
 *   serving_chat.py / serving_completions.py `_validate_request`), and takes an adapter as
 *   `"<base>:<adapter>"` or as `lora_path` (serving_base.py `_resolve_lora_path`).
 * KV is not shared across adapters: an adapter's prompts are salted before they reach the KV
 * cache (vLLM keys its block hashes by LoRA id too), so they never hit the base model's blocks.
 */
import { fmix32 } from "../src/hash/fmix32.js";
import { FNV_OFFSET, FNV_PRIME } from "./hash.js";
import type { SimFlavor } from "./options.js";
import { BadRequest } from "./protocol.js";
import { VOCAB_SIZE } from "./tokenizer.js";

export interface ServedModels {
  /** Served names of the base model; the first is the default. */
  readonly names: readonly string[];
  readonly adapters: readonly string[];
  /** Each adapter's path (its card's `root`); `/adapters/<name>` when not given. */
  readonly paths?: ReadonlyMap<string, string>;
}

/** What a request runs on: the base model (adapter undefined) or one adapter. */
export interface ModelChoice {
  /** The name echoed in the response's `model`. */
  readonly name: string;
  readonly adapter: string | undefined;
  /** A batch's `lora_path` list: each item's adapter (undefined = the base model). */
  readonly perItem?: readonly (string | undefined)[];
}

export class ModelNotFound extends Error {}

/**
 * Resolve a request's model. `requested` is the body's `model` (undefined when absent);
 * `loraPath` is SGLang's `lora_path` (a name, or one per item of a batch). Throws ModelNotFound (404) or BadRequest (400).
 */
export function chooseModel(
  served: ServedModels,
  flavor: SimFlavor,
  requested: string | undefined,
  loraPath: unknown,
): ModelChoice {
  const base = served.names[0] as string;
  if (flavor === "vllm") {
    if (requested === undefined || served.names.includes(requested))
      return { name: requested ?? base, adapter: undefined };
    if (served.adapters.includes(requested)) return { name: requested, adapter: requested };
    throw new ModelNotFound(`The model \`${requested}\` does not exist.`);
  }
  if (typeof loraPath === "string") {
    return { name: requested ?? base, adapter: loadedAdapter(served, loraPath) };
  }
  if (Array.isArray(loraPath)) {
    const perItem = loraPath.map((p: unknown) => {
      if (p === null || p === "") return undefined;
      if (typeof p !== "string")
        throw new BadRequest("lora_path entries must be strings", "lora_path");
      return loadedAdapter(served, p);
    });
    return { name: requested ?? base, adapter: undefined, perItem };
  }
  const colon = requested?.lastIndexOf(":") ?? -1;
  if (requested !== undefined && colon > 0 && served.names.includes(requested.slice(0, colon))) {
    const adapter = requested.slice(colon + 1);
    if (!served.adapters.includes(adapter))
      throw new BadRequest(`LoRA adapter ${adapter} is not loaded`, "model");
    return { name: requested, adapter };
  }
  return { name: requested ?? base, adapter: undefined };
}

function loadedAdapter(served: ServedModels, name: string): string {
  if (!served.adapters.includes(name))
    throw new BadRequest(`LoRA adapter ${name} is not loaded`, "lora_path");
  return name;
}

/** The /v1/models body, as the flavor's engine lists its models. */
export function modelList(
  served: ServedModels,
  flavor: SimFlavor,
  maxModelLen: number,
  created: number,
) {
  const base = served.names[0] as string;
  const card = (id: string, root: string, parent: string | null, maxLen: number | null) => ({
    id,
    object: "model",
    created,
    owned_by: flavor,
    root,
    parent,
    max_model_len: maxLen,
  });
  const data =
    flavor === "vllm"
      ? [
          ...served.names.map((name) => card(name, base, null, maxModelLen)),
          ...served.adapters.map((a) =>
            card(a, served.paths?.get(a) ?? `/adapters/${a}`, base, null),
          ),
        ]
      : [card(base, base, null, maxModelLen)];
  return { object: "list", data };
}

/** An adapter's prompt as its KV cache sees it: every id shifted by the adapter's salt. */
export function saltForAdapter(prompt: readonly number[], adapter: string): number[] {
  let h = FNV_OFFSET;
  for (let i = 0; i < adapter.length; i++) h = Math.imul(h ^ adapter.charCodeAt(i), FNV_PRIME);
  const salt = (fmix32(h) % (VOCAB_SIZE - 1)) + 1;
  return prompt.map((t) => (t + salt) % VOCAB_SIZE);
}
