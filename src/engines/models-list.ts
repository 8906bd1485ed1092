import type { EngineKind } from "./engine-reading.js";

/**
 * GET /v1/models, as both engines answer it: {"object": "list", "data": [{"id", "root",
 * "parent", ...}]}. vLLM lists every LoRA adapter as its own entry whose `parent` is the base
 * model (vllm/entrypoints/openai/serving_models.py, show_available_models); SGLang lists its
 * served_model_name (sglang/srt/entrypoints/http_server.py, available_models), and any adapter
 * entry it lists is read the same way. A request names a model or an adapter: every id counts.
 */

/** The ids served; undefined when the list is empty (then the worker is taken to serve anything). */
export function readModelsList(body: unknown): ReadonlySet<string> | undefined {
  const data = (body as { data?: unknown } | null)?.data;
  if (typeof body !== "object" || body === null || !Array.isArray(data)) {
    throw new TypeError("/v1/models did not answer an OpenAI model list");
  }
  const ids = new Set<string>();
  for (const entry of data) {
    const id = (entry as { id?: unknown } | null)?.id;
    if (typeof id === "string" && id !== "") ids.add(id);
  }
  return ids.size > 0 ? ids : undefined;
}

/**
 * The engine that answered the list, from the `owned_by` each engine writes into its model cards
 * ("vllm": vllm/entrypoints/openai/engine/protocol.py ModelCard; "sglang":
 * sglang/srt/entrypoints/openai/protocol.py ModelCard); undefined for any other owner.
 */
export function readModelsOwner(body: unknown): EngineKind | undefined {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return undefined;
  for (const entry of data) {
    const owner = (entry as { owned_by?: unknown } | null)?.owned_by;
    if (owner === "vllm" || owner === "sglang") return owner;
  }
  return undefined;
}

/**
 * The LoRA adapters among the listed ids: vLLM lists each with `parent` = its base model
 * (serving_models.py show_available_models); base models have none, or themselves.
 */
export function readAdapterIds(body: unknown): ReadonlySet<string> {
  const data = (body as { data?: unknown } | null)?.data;
  const ids = new Set<string>();
  if (!Array.isArray(data)) return ids;
  for (const entry of data) {
    const { id, parent } = (entry ?? {}) as { id?: unknown; parent?: unknown };
    if (typeof id === "string" && typeof parent === "string" && parent !== "" && parent !== id)
      ids.add(id);
  }
  return ids;
}
