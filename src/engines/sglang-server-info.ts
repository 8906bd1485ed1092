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
  /**
   * Requests the engine runs at once over all DP ranks, when said: each rank's cap as the
   * scheduler computed it (`internal_states[].effective_max_running_requests_per_dp`, set from
   * Scheduler.max_running_requests in srt/managers/scheduler.py get_internal_state), else the
   * `--max-running-requests` server argument (null unless set), times the ranks.
   */
  readonly maxRunningRequests?: number;
  /**
   * `--priority-scheduling-preemption-threshold` (python/sglang/srt/server_args.py
   * `priority_scheduling_preemption_threshold`, default 10), said only while the engine preempts
   * by priority (`enable_priority_scheduling` on, `disable_priority_preemption` off): a waiting
   * request preempts a running one only when its priority is above by more than this
   * (python/sglang/srt/managers/schedule_policy.py `preempt_to_schedule`).
   */
  readonly preemptionThreshold?: number;
  /**
   * `--max-loaded-loras` (server_args.py `max_loaded_loras`, null when unbounded): a runtime load
   * beyond it is refused (tokenizer_manager.py load_lora_adapter).
   */
  readonly maxLoadedLoras?: number;
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
  const runningPerRank =
    effectiveMaxRunning(info.internal_states) ?? positiveInteger(info.max_running_requests);
  const preempts =
    info.enable_priority_scheduling === true && info.disable_priority_preemption !== true;
  const threshold = preempts
    ? nonNegative(info.priority_scheduling_preemption_threshold)
    : undefined;
  const maxLoadedLoras = positiveInteger(info.max_loaded_loras);
  return {
    ...(maxLoadedLoras !== undefined ? { maxLoadedLoras } : {}),
    ...(threshold !== undefined ? { preemptionThreshold: threshold } : {}),
    ...(perRank !== undefined ? { capacityTokens: perRank * (ranks ?? 1) } : {}),
    ...(ranks !== undefined ? { dpSize: ranks } : {}),
    ...(runningPerRank !== undefined ? { maxRunningRequests: runningPerRank * (ranks ?? 1) } : {}),
  };
}

/** The first rank's effective running cap in internal_states (every rank has the same config). */
function effectiveMaxRunning(states: unknown): number | undefined {
  if (!Array.isArray(states)) return undefined;
  for (const state of states) {
    if (typeof state !== "object" || state === null) continue;
    const cap = positiveInteger(
      (state as Record<string, unknown>).effective_max_running_requests_per_dp,
    );
    if (cap !== undefined) return cap;
  }
  return undefined;
}

function positiveInteger(value: unknown): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 1 ? value : undefined;
}

function nonNegative(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : undefined;
}
