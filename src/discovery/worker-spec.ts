import { RouterError } from "../errors.js";
import { checkKvEndpoint } from "../kv-events/endpoint-rules.js";
import type { KvEndpoints } from "../kv-events/manager.js";
import type { DeclaredFields } from "../workers/declared-fields.js";
import { systemResolver } from "../workers/host-lookup.js";
import { roleFrom, type WorkerRole } from "../workers/worker-role.js";

/** One worker as every source gives it: the fields of POST /workers, parsed. */
export interface WorkerSpec {
  url: string;
  /** Bearer key for this worker; overrides --worker-api-key. Never logged. */
  apiKey?: string;
  /** Its engine's KV-event stream (needs --kv-events). */
  kvEndpoints?: KvEndpoints;
  /** Prefill (with its bootstrap port) or decode, for prefill/decode disaggregation; regular when absent. */
  role?: WorkerRole;
  /** model_id, priority, cost, labels, disable_health_check, max_running: only those given. */
  declared?: Partial<DeclaredFields>;
}

/** SGLang's WorkerConfigRequest fields radixgate keeps (declared-fields.ts). */
const DECLARED_FIELD_NAMES = [
  "model_id",
  "priority",
  "cost",
  "labels",
  "disable_health_check",
  "max_running",
] as const;

/** The fields a worker entry may have (POST /workers, --worker-file). */
export const WORKER_SPEC_FIELDS = [
  "url",
  "api_key",
  "kv_events_endpoint",
  "kv_events_replay_endpoint",
  "worker_type",
  "bootstrap_port",
  ...DECLARED_FIELD_NAMES,
] as const;

/**
 * A WorkerSpec from the JSON fields of POST /workers or a --worker-file entry; throws a
 * RouterError (invalid_worker_url / invalid_request) saying what is wrong.
 */
export function workerSpecFrom(fields: Record<string, unknown>, example: string): WorkerSpec {
  if (typeof fields.url !== "string" || fields.url === "") {
    throw new RouterError("invalid_worker_url", example);
  }
  const apiKey = apiKeyField(fields.api_key);
  const kvEndpoints = kvEndpointsField(fields);
  const role = roleFields(fields);
  const declared = declaredFields(fields);
  return {
    url: fields.url,
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(kvEndpoints !== undefined ? { kvEndpoints } : {}),
    ...(role !== undefined ? { role } : {}),
    ...(declared !== undefined ? { declared } : {}),
  };
}

const MAX_LABELS = 64;
const MAX_LABEL_CHARS = 256;

/**
 * SGLang's model_id, priority (u32), cost (f32), labels (string map) and disable_health_check,
 * checked; undefined when none is given. Also the fields of SGLang's PUT /workers/{id}
 * (WorkerUpdateRequest: priority, cost, labels).
 */
export function declaredFields(
  fields: Record<string, unknown>,
): Partial<DeclaredFields> | undefined {
  const given = (name: string) => fields[name] !== undefined && fields[name] !== null;
  if (!DECLARED_FIELD_NAMES.some(given)) return undefined;
  const bad = (message: string) => new RouterError("invalid_request", message);
  const out: { -readonly [K in keyof DeclaredFields]?: DeclaredFields[K] } = {};
  if (given("model_id")) {
    const id = fields.model_id;
    if (typeof id !== "string" || id === "" || id.length > MAX_LABEL_CHARS)
      throw bad(`model_id must be a non-empty string of at most ${MAX_LABEL_CHARS} characters.`);
    out.modelId = id;
  }
  if (given("priority")) {
    const p = fields.priority;
    if (typeof p !== "number" || !Number.isInteger(p) || p < 0 || p > 4_294_967_295)
      throw bad("priority must be a non-negative integer (SGLang's default is 50).");
    out.priority = p;
  }
  if (given("cost")) {
    const c = fields.cost;
    if (typeof c !== "number" || !Number.isFinite(c) || c < 0)
      throw bad("cost must be a non-negative number (SGLang's default is 1.0).");
    out.cost = c;
  }
  if (given("labels")) out.labels = labelsField(fields.labels);
  if (given("disable_health_check")) {
    if (typeof fields.disable_health_check !== "boolean")
      throw bad("disable_health_check must be true or false.");
    out.healthChecks = !fields.disable_health_check;
  }
  if (given("max_running")) {
    const n = fields.max_running;
    if (typeof n !== "number" || !Number.isInteger(n) || n < 1 || n > 1_000_000)
      throw bad("max_running must be an integer from 1 to 1000000 (the engine's batch cap).");
    out.maxRunning = n;
  }
  return out;
}

function labelsField(value: unknown): Record<string, string> {
  const message = `labels must be an object of at most ${MAX_LABELS} string values of at most ${MAX_LABEL_CHARS} characters, e.g. {"zone": "a"}.`;
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new RouterError("invalid_request", message);
  const entries = Object.entries(value);
  if (entries.length > MAX_LABELS) throw new RouterError("invalid_request", message);
  for (const [key, label] of entries) {
    if (typeof label !== "string" || key.length > MAX_LABEL_CHARS || label.length > MAX_LABEL_CHARS)
      throw new RouterError("invalid_request", message);
  }
  // fromEntries: a "__proto__" key stays a plain own property.
  return Object.freeze(Object.fromEntries(entries) as Record<string, string>);
}

/**
 * `worker_type` ("regular" | "prefill" | "decode") and `bootstrap_port` (prefill only), as SGLang's
 * gateway takes them (WorkerConfigRequest, sgl-model-gateway/src/protocols/worker_spec.rs);
 * undefined when neither is given.
 */
export function roleFields(fields: {
  worker_type?: unknown;
  bootstrap_port?: unknown;
}): WorkerRole | undefined {
  if (fields.worker_type === undefined && fields.bootstrap_port === undefined) return undefined;
  const role = roleFrom(fields.worker_type, fields.bootstrap_port);
  if (typeof role === "string") throw new RouterError("invalid_request", `${role}.`);
  return role;
}

export function apiKeyField(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || value === "") {
    throw new RouterError("invalid_request", "api_key must be a non-empty string.");
  }
  return value;
}

/** `kv_events_endpoint` (+ optional `kv_events_replay_endpoint`): ZMQ tcp:// or ipc:// URLs. */
function kvEndpointsField(fields: {
  kv_events_endpoint?: unknown;
  kv_events_replay_endpoint?: unknown;
}): KvEndpoints | undefined {
  const { kv_events_endpoint: endpoint, kv_events_replay_endpoint: replay } = fields;
  if (endpoint === undefined || endpoint === null) {
    if (replay !== undefined && replay !== null) {
      throw new RouterError(
        "invalid_request",
        "kv_events_replay_endpoint needs kv_events_endpoint.",
      );
    }
    return undefined;
  }
  const zmqUrl = (value: unknown, name: string): string => {
    if (typeof value !== "string" || !/^(tcp|ipc):\/\/\S+$/.test(value)) {
      throw new RouterError(
        "invalid_request",
        `${name} must be a ZMQ endpoint like "tcp://10.0.0.1:5557".`,
      );
    }
    return value;
  };
  return {
    endpoint: zmqUrl(endpoint, "kv_events_endpoint"),
    replayEndpoint:
      replay === undefined || replay === null
        ? undefined
        : zmqUrl(replay, "kv_events_replay_endpoint"),
  };
}

/** The rules KV-event endpoints from outside the process are held to. */
export interface KvEndpointRules {
  allowIpc: boolean;
  allowLinkLocal: boolean;
  connectTimeoutMs: number;
}

/** The worker-URL rules applied to KV-event endpoints (kv-events/endpoint-rules.ts). */
export async function checkedKvEndpoints(
  given: KvEndpoints,
  rules: KvEndpointRules,
): Promise<KvEndpoints> {
  const checks = {
    allowIpc: rules.allowIpc,
    allowLinkLocal: rules.allowLinkLocal,
    resolveHost: systemResolver(rules.connectTimeoutMs),
  };
  try {
    return {
      endpoint: await checkKvEndpoint(given.endpoint, "kv_events_endpoint", checks),
      replayEndpoint:
        given.replayEndpoint === undefined
          ? undefined
          : await checkKvEndpoint(given.replayEndpoint, "kv_events_replay_endpoint", checks),
    };
  } catch (err) {
    throw new RouterError("invalid_request", (err as Error).message);
  }
}
