/** The HTTP paths the simulated engines answer, and what an inference path runs. */
import type { ServerResponse } from "node:http";
import type { InferenceEndpoint } from "./protocol.js";
import { sendJson } from "./serve.js";

export const INFERENCE_PATHS: Readonly<Record<string, InferenceEndpoint>> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/generate": "generate",
  "/v1/embeddings": "embeddings",
  "/v1/responses": "responses",
};

export const OTHER_PATHS = new Set([
  "/health",
  "/health_generate",
  "/v1/models",
  "/get_model_info",
  "/get_server_info",
  "/version",
  "/metrics",
  "/tokenize",
  "/get_load",
  "/flush_cache",
  "/reset_prefix_cache",
  "/v1/load_lora_adapter",
  "/v1/unload_lora_adapter",
  "/load_lora_adapter",
  "/unload_lora_adapter",
  "/_sim/faults",
  "/_sim/stats",
]);

export function methodNotAllowed(res: ServerResponse): void {
  sendJson(res, 405, { detail: "Method Not Allowed" });
}

/** A header's value as one string (repeated headers joined, as HTTP allows). */
export function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(",") : value;
}
