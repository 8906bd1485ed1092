import { ConfigError } from "../errors.js";

/**
 * The admission flags (issue 24): who a request belongs to, when a worker counts as saturated, and
 * how the router's queue holds requests while the fleet is. config.ts splices these rows into its
 * table (the feature owns its rows; config.ts only assembles them).
 */
export interface AdmissionConfig {
  tenantHeader: string;
  priorityHeader: string;
  maxTenants: number;
  queueTimeoutHeader: string;
  queueWhenSaturated: boolean;
  saturationQueueDepth: number;
  saturationKvUsage: number;
  saturationPendingPrefillChars: number;
  maxQueuedPerTenant: number;
  tenantQuotaFile: string;
}

type Parser<T> = (raw: string, flag: string) => T;

/** One settings row, the shape of config.ts's `Setting` for an AdmissionConfig key. */
interface AdmissionSetting<K extends keyof AdmissionConfig> {
  key: K;
  flag: string;
  arg: string;
  description: string;
  default: AdmissionConfig[K];
  parse: Parser<AdmissionConfig[K]>;
  secret?: boolean;
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

const headerName = (raw: string, flag: string): string => {
  const name = raw.trim().toLowerCase();
  if (!HEADER_NAME.test(name)) throw new ConfigError(flag, `must be a header name, got "${raw}"`);
  return name;
};

const bounded =
  (min: number, max: number, integer: boolean) =>
  (raw: string, flag: string): number => {
    const value = Number(raw.trim());
    const ok =
      raw.trim() !== "" &&
      Number.isFinite(value) &&
      (!integer || Number.isInteger(value)) &&
      value >= min &&
      value <= max;
    if (!ok)
      throw new ConfigError(
        flag,
        `must be ${integer ? "an integer" : "a number"} in [${min}, ${max}], got "${raw}"`,
      );
    return value;
  };

const onOff = (raw: string | boolean, flag: string): boolean => {
  const value = String(raw).trim().toLowerCase();
  if (["true", "1", "yes", "on"].includes(value)) return true;
  if (["false", "0", "no", "off", ""].includes(value)) return false;
  throw new ConfigError(flag, `must be true or false, got "${raw}"`);
};

function row<K extends keyof AdmissionConfig>(s: AdmissionSetting<K>): AdmissionSetting<K> {
  return s;
}

/** The rows, in the order --help and docs/configuration.md show them (after --queue-timeout-secs). */
export const ADMISSION_SETTINGS = [
  row({
    key: "queueWhenSaturated",
    flag: "--queue-when-saturated",
    arg: "[bool]",
    description:
      "Hold requests in the router's queue while every worker that could take them is saturated (see --saturation-*), and release them by priority and tenant fairness as room appears. See docs/admission.md.",
    default: false,
    parse: onOff,
  }),
  row({
    key: "saturationQueueDepth",
    flag: "--saturation-queue-depth",
    arg: "<n>",
    description:
      "A worker is saturated when its engine's waiting queue (sglang:num_queue_reqs, vllm:num_requests_waiting; the last fresh reading, moved by this router's requests without a first byte since) reaches this many requests.",
    default: 5,
    parse: bounded(1, 1_000_000, true),
  }),
  row({
    key: "saturationKvUsage",
    flag: "--saturation-kv-usage",
    arg: "<ratio>",
    description:
      "A worker is saturated when its engine's KV-cache usage (the last fresh reading) reaches this fraction (1 = never on this signal).",
    default: 0.9,
    parse: bounded(0.01, 1, false),
  }),
  row({
    key: "saturationPendingPrefillChars",
    flag: "--saturation-pending-prefill-chars",
    arg: "<chars>",
    description:
      "A worker is saturated when this router's requests there without a first byte hold this many uncached prompt characters (the router's own estimate, always fresh; 0 = never on this signal).",
    default: 0,
    parse: bounded(0, Number.MAX_SAFE_INTEGER, true),
  }),
  row({
    key: "maxQueuedPerTenant",
    flag: "--max-queued-per-tenant",
    arg: "<n>",
    description:
      "Requests of one tenant that may wait in the queue (the whole queue is bounded by --queue-size); beyond it the lowest priority is refused with 429.",
    default: 256,
    parse: bounded(1, 1_000_000, true),
  }),
  row({
    key: "queueTimeoutHeader",
    flag: "--queue-timeout-header",
    arg: "<name>",
    description:
      "Request header with the longest wait in the queue for that request, in seconds; it can only shorten --queue-timeout-secs.",
    default: "x-queue-timeout-secs",
    parse: headerName,
  }),
  row({
    key: "tenantHeader",
    flag: "--tenant-header",
    arg: "<name>",
    description:
      "Request header naming the tenant (fair share in the queue, metrics); without it the tenant is the API key's id (key-<hash>), else default.",
    default: "x-tenant-id",
    parse: headerName,
  }),
  row({
    key: "priorityHeader",
    flag: "--priority-header",
    arg: "<name>",
    description:
      "Request header with the request's priority: an integer in [-100, 100], higher goes first (default 0; anything else counts as 0).",
    default: "x-priority",
    parse: headerName,
  }),
  row({
    key: "tenantQuotaFile",
    flag: "--tenant-quota",
    arg: "<file>",
    description:
      "A JSON or YAML file of per-tenant quotas (tokens per minute, concurrent requests; `others` for tenants not listed); over one, 429 with Retry-After. Shared by the replicas through --state-url, else per process. Watched: a bad later version is logged and the last good one stands. Empty = none. See docs/admission.md#quotas.",
    default: "",
    parse: (raw) => raw.trim(),
  }),
  row({
    key: "maxTenants",
    flag: "--max-tenants",
    arg: "<n>",
    description:
      "Distinct tenants tracked at once (queue shares, metric labels); a new one beyond this counts as default until an idle one is forgotten.",
    default: 64,
    parse: bounded(1, 10_000, true),
  }),
] as const;
