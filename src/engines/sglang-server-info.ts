/**
 * SGLang's GET /get_server_info (sglang/python/sglang/srt/entrypoints/http_server.py): the server
 * arguments (model_path, served_model_name, page_size, dp_size, ...) merged with the scheduler's
 * start-up info (max_total_num_tokens, max_req_input_len; Scheduler.get_init_info in
 * srt/managers/scheduler.py), plus internal_states and version. max_total_num_tokens is one
 * scheduler's KV pool; with dp_size > 1 every DP rank has a pool of its own.
 */
export interface ServerInfo {
  /** KV cache capacity in tokens over all DP ranks (0 when the engine says 0). */
  readonly capacityTokens?: number;
  /** Data-parallel ranks (`dp_size`), when said: each has a KV cache and an event publisher. */
  readonly dpSize?: number;
}

/** Throws a TypeError when the body is not a JSON object. */
export function readSglangServerInfo(body: unknown): ServerInfo {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new TypeError("/get_server_info did not answer a JSON object");
  }
  const info = body as Record<string, unknown>;
  const perRank = nonNegative(info.max_total_num_tokens);
  const dpSize = nonNegative(info.dp_size);
  const ranks =
    dpSize !== undefined && Number.isInteger(dpSize) && dpSize >= 1 ? dpSize : undefined;
  return {
    ...(perRank !== undefined ? { capacityTokens: perRank * (ranks ?? 1) } : {}),
    ...(ranks !== undefined ? { dpSize: ranks } : {}),
  };
}

function nonNegative(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined;
}
