/**
 * What an operator may say of a worker when adding it, beyond its URL, with the names and
 * defaults of SGLang's gateway (WorkerConfigRequest in sgl-model-gateway/src/protocols/
 * worker_spec.rs: priority 50, cost 1.0, labels, model_id, and the per-worker
 * disable_health_check). Shown in the admin API's answers; routing reads `modelId` (until the
 * engine's /v1/models says what it serves) and `healthChecks`.
 */
export interface DeclaredFields {
  /** The model it serves, as the operator said; the engine's /v1/models replaces it once read. */
  readonly modelId?: string;
  /** Higher is preferred in SGLang's gateway; kept and shown (radixgate's policies weigh load and cache). */
  priority: number;
  /** Relative cost; kept and shown, as priority. */
  cost: number;
  labels: Readonly<Record<string, string>>;
  /** False: never probed, always taken as healthy (the breaker still applies). */
  readonly healthChecks: boolean;
  /**
   * Requests the engine runs at once (its batch cap: vLLM --max-num-seqs, SGLang
   * --max-running-requests), as the operator said: admission's free slots count from it
   * (workers/saturation.ts); radixgate's own field, beside SGLang's.
   */
  readonly maxRunning?: number;
}

export const DEFAULT_DECLARED: DeclaredFields = Object.freeze({
  priority: 50,
  cost: 1,
  labels: Object.freeze({}),
  healthChecks: true,
});
