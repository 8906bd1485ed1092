/**
 * What a worker does in the fleet: a regular worker runs whole requests; with prefill/decode
 * disaggregation a prefill worker computes the prompt's KV cache and hands it to a decode worker,
 * which generates the tokens. A prefill worker may name a bootstrap port (SGLang's KV hand-off
 * server, `--disaggregation-bootstrap-port`); null = none, as SGLang's `--prefill URL none`.
 *
 * The names are SGLang's model gateway's: WorkerConfigRequest.worker_type ("regular", "prefill",
 * "decode") and bootstrap_port (sgl-project/sglang sgl-model-gateway/src/protocols/worker_spec.rs).
 */
export const WORKER_TYPES = ["regular", "prefill", "decode"] as const;
export type WorkerType = (typeof WORKER_TYPES)[number];

export interface WorkerRole {
  readonly type: WorkerType;
  /** Prefill workers only: the port of their bootstrap server; null = none. */
  readonly bootstrapPort: number | null;
}

export const REGULAR_ROLE: WorkerRole = Object.freeze({ type: "regular", bootstrapPort: null });
export const DECODE_ROLE: WorkerRole = Object.freeze({ type: "decode", bootstrapPort: null });

export function prefillRole(bootstrapPort: number | null): WorkerRole {
  return Object.freeze({ type: "prefill", bootstrapPort });
}

/**
 * A role from a worker type and a bootstrap port as they come in (admin API, worker file,
 * discovery); returns the reason as a string when either is wrong.
 */
export function roleFrom(type: unknown, bootstrapPort: unknown): WorkerRole | string {
  const kind = type === undefined || type === null ? "regular" : type;
  if (typeof kind !== "string" || !(WORKER_TYPES as readonly string[]).includes(kind)) {
    return `worker_type must be one of ${WORKER_TYPES.join(", ")}, got ${JSON.stringify(type)}`;
  }
  const port = bootstrapPortFrom(bootstrapPort);
  if (typeof port === "string") return port;
  if (port !== null && kind !== "prefill") {
    return `bootstrap_port is for prefill workers only (worker_type ${kind})`;
  }
  if (kind === "prefill") return prefillRole(port);
  return kind === "decode" ? DECODE_ROLE : REGULAR_ROLE;
}

/** A bootstrap port: an integer 1..65535, or null / undefined / "none" for none. */
export function bootstrapPortFrom(value: unknown): number | null | string {
  if (value === undefined || value === null) return null;
  if (typeof value === "string" && value.trim().toLowerCase() === "none") return null;
  const port = typeof value === "string" && /^\d+$/.test(value.trim()) ? Number(value) : value;
  if (typeof port !== "number" || !Number.isInteger(port) || port < 1 || port > 65535) {
    return `bootstrap_port must be a port number (1-65535) or "none", got ${JSON.stringify(value)}`;
  }
  return port;
}
