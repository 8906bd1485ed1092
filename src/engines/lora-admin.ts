/**
 * The engines' runtime LoRA routes, as the router calls them (--lora-load-on-demand):
 *
 * - vLLM, served only when the engine runs with VLLM_ALLOW_RUNTIME_LORA_UPDATING
 *   (vllm/entrypoints/serve/lora/api_router.py; fields in .../serve/lora/protocol.py, checks and
 *   texts in vllm/entrypoints/openai/models/serving.py): POST /v1/load_lora_adapter
 *   `{lora_name, lora_path}` → 200 and a line of text; 400 `InvalidUserInput` ("has already been
 *   loaded"), 404 `NotFoundError` when the path holds no adapter. POST /v1/unload_lora_adapter
 *   `{lora_name}` → 200; 404 "cannot be found". Errors are `{"error": {message, type, code}}`.
 *   Without the variable both routes are FastAPI's 404 `{"detail": "Not Found"}`.
 * - SGLang (python/sglang/srt/entrypoints/http_server.py; tokenizer_manager.py load_lora_adapter;
 *   lora/lora_registry.py): POST /load_lora_adapter `{lora_name, lora_path}` and POST
 *   /unload_lora_adapter `{lora_name}` answer LoRAUpdateOutput `{success, error_message,
 *   loaded_adapters}`, 200 or 400. A load is refused once `--max-loaded-loras` adapters are
 *   registered ("Maximum number of loaded LoRA adapters is N"), or when the name exists
 *   ("already exists"); an unload waits until the requests using the adapter have finished.
 */
import type { EngineKind } from "./engine-reading.js";

export interface LoraCall {
  readonly path: string;
  readonly json: { lora_name: string; lora_path?: string };
}

export function loraLoadCall(engine: EngineKind, name: string, path: string): LoraCall {
  return {
    path: engine === "vllm" ? "/v1/load_lora_adapter" : "/load_lora_adapter",
    json: { lora_name: name, lora_path: path },
  };
}

export function loraUnloadCall(engine: EngineKind, name: string): LoraCall {
  return {
    path: engine === "vllm" ? "/v1/unload_lora_adapter" : "/unload_lora_adapter",
    json: { lora_name: name },
  };
}

export type LoraAnswer =
  | { readonly ok: true }
  | {
      readonly ok: false;
      /** The engine holds the name already: as good as loaded. */
      readonly already: boolean;
      /** The engine's bound on loaded adapters is reached (SGLang --max-loaded-loras). */
      readonly full: boolean;
      /** The engine does not serve the route (vLLM without VLLM_ALLOW_RUNTIME_LORA_UPDATING). */
      readonly unserved: boolean;
      readonly message: string;
    };

/** The engine's answer to a load or an unload, from its status and body text. */
export function readLoraAnswer(status: number, text: string): LoraAnswer {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const b = (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
  // SGLang answers `success` whatever the status; vLLM's success is a line of text.
  if (b.success === true || (status === 200 && b.success === undefined)) return { ok: true };
  const error = (typeof b.error === "object" && b.error !== null ? b.error : {}) as Record<
    string,
    unknown
  >;
  const message =
    (typeof b.error_message === "string" && b.error_message) ||
    (typeof error.message === "string" && error.message) ||
    (typeof b.detail === "string" && b.detail) ||
    `status ${status}`;
  return {
    ok: false,
    already: /already (been loaded|exists)/.test(message),
    full: /Maximum number of loaded LoRA adapters/.test(message),
    unserved: status === 404 && b.detail === "Not Found",
    message,
  };
}
