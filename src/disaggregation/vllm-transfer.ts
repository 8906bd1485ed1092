/**
 * vLLM's P/D hand-off with the NixlConnector, as vLLM's example proxy runs it
 * (vllm-project/vllm tests/v1/kv_connector/nixl_integration/toy_proxy_server.py,
 * send_request_to_service and the handlers around it): the prefill worker gets the request with
 * `max_tokens: 1` (and `max_completion_tokens: 1` when given), `stream: false`, no
 * `stream_options`, no `min_tokens` or `min_completion_tokens` (vLLM refuses a `min_tokens` above
 * `max_tokens`, vllm/sampling_params.py _verify_args, and its proxy removes them for the prefill),
 * and `kv_transfer_params` asking for a remote decode; its answer carries the
 * `kv_transfer_params` (remote engine, host, port, block ids) that the decode worker gets with the
 * client's request as it was, to pull the KV cache from the prefill worker.
 */
import { bodyWithTrailingField } from "../proxy/json-field.js";
import type { JsonObject } from "./bootstrap.js";

/** What the prefill worker is asked for: keep the KV blocks for a decode elsewhere. */
const REMOTE_DECODE = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
} as const;

/** The prefill worker's request: one token, not streamed, with the remote-decode ask. */
export function prefillBody(body: JsonObject): Buffer {
  const { stream_options: _o, min_tokens: _m, min_completion_tokens: _c, ...rest } = body;
  const out: JsonObject = {
    ...rest,
    kv_transfer_params: REMOTE_DECODE,
    stream: false,
    max_tokens: 1,
  };
  if ("max_completion_tokens" in body) out.max_completion_tokens = 1;
  return Buffer.from(JSON.stringify(out));
}

/**
 * The kv_transfer_params of a prefill answer, or a reason it has none usable. vLLM answers with
 * them at the top level of the completion object.
 */
export function transferParamsOf(answer: unknown): JsonObject | string {
  if (typeof answer !== "object" || answer === null || Array.isArray(answer)) {
    return "its answer is not a JSON object";
  }
  const params = (answer as { kv_transfer_params?: unknown }).kv_transfer_params;
  if (typeof params !== "object" || params === null || Array.isArray(params)) {
    return "its answer has no kv_transfer_params (is it running with a KV connector, kv_role kv_producer or kv_both?)";
  }
  return params as JsonObject;
}

/**
 * The decode worker's request: the client's body (`base`: as sent, or without its own
 * kv_transfer_params, pd-body.ts pairView), with the prefill worker's transfer params added as
 * its last field: not parsed or serialized again here.
 */
export function decodeBody(base: Buffer, params: JsonObject): Buffer {
  return bodyWithTrailingField(base, "kv_transfer_params", JSON.stringify(params));
}
