/**
 * The admission flags (issue 24): how many requests are forwarded at once and how many wait, who a
 * request belongs to, when a worker counts as saturated, and how the router's queue holds requests
 * while the fleet is (assembly/admission.ts builds the queue from AdmissionConfig).
 */
import {
  flagValue,
  HEADER_NAME,
  integer,
  number,
  type Parser,
  SEC,
  seconds,
} from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";

export interface AdmissionConfig {
  /** Requests forwarded at once (0 = no limit); more wait in the queue. */
  maxConcurrentRequests: number;
  queueSize: number;
  /** --queue-timeout-secs: the longest wait in the queue. */
  queueTimeoutMs: number;
  queueWhenSaturated: boolean;
  saturationQueueDepth: number;
  saturationKvUsage: number;
  saturationPendingPrefillChars: number;
  /** --tenant-reserve-slots: slots kept free for tenants under their share (0 = off). */
  tenantReserveSlots: number;
  /** --hold-for-free-slot: while tenants share the slots, release only into a free one. */
  holdForFreeSlot: boolean;
  /** --tenant-reserve-pace: a tenant the reserve holds back goes one prompt in prefill at a time. */
  tenantReservePace: boolean;
  maxQueuedPerTenant: number;
  queueTimeoutHeader: string;
  tenantHeader: string;
  priorityHeader: string;
  maxTenants: number;
  /** --tenant-quota ("" = none). */
  tenantQuotaFile: string;
  /** --engine-priority: pass the request's priority to the engine's scheduler. */
  enginePriority: boolean;
  /** --queue-wait-header: response header with the request's wait in the queue; undefined = off. */
  queueWaitHeader: string | undefined;
}

const headerName: Parser<string> = (raw, flag) => {
  const name = raw.trim().toLowerCase();
  if (!HEADER_NAME.test(name)) throw new ConfigError(flag, `must be a header name, got "${raw}"`);
  return name;
};

/** Headers the router or HTTP sets on an answer: a queue-wait header under one would clobber it. */
const ANSWER_HEADERS =
  /^(content-|transfer-encoding$|connection$|retry-after$|x-request-id$|x-radixgate-)/;

const answerHeaderName: Parser<string | undefined> = (raw, flag) => {
  if (raw.trim() === "") return undefined;
  const name = headerName(raw, flag);
  if (ANSWER_HEADERS.test(name))
    throw new ConfigError(flag, `must not be "${name}": the router or HTTP sets it`);
  return name;
};

export const ADMISSION_SETTINGS = section<AdmissionConfig>({
  maxConcurrentRequests: {
    flag: "--max-concurrent-requests",
    arg: "<n>",
    description: "Requests forwarded at once; more wait in a queue (0 or -1 = no limit).",
    default: 0,
    // -1 is the SGLang router's spelling of "no limit".
    parse: (raw, flag) => (raw.trim() === "-1" ? 0 : integer(0)(raw, flag)),
  },
  queueSize: {
    flag: "--queue-size",
    arg: "<n>",
    description:
      "With --max-concurrent-requests or --queue-when-saturated: requests that may wait in all; beyond it the lowest priority is refused with 429.",
    default: 1024,
    parse: integer(0),
  },
  queueTimeoutMs: {
    flag: "--queue-timeout-secs",
    arg: "<secs>",
    description:
      "With --max-concurrent-requests or --queue-when-saturated: longest wait in the queue (a request's --queue-timeout-header may shorten it); beyond it 429 with Retry-After.",
    default: 60 * SEC,
    parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  },
  queueWhenSaturated: {
    flag: "--queue-when-saturated",
    arg: "[bool]",
    description:
      "Hold requests in the router's queue while every worker that could take them is saturated (see --saturation-*), and release them by priority and tenant fairness as room appears. See docs/admission.md.",
    default: false,
    parse: flagValue,
  },
  saturationQueueDepth: {
    flag: "--saturation-queue-depth",
    arg: "<n>",
    description:
      "A worker is saturated when its engine's waiting queue (its free batch slots as counted from this router's requests in flight and the last fresh reading: sglang:num_queue_reqs, vllm:num_requests_waiting) reaches this many requests; 0: as soon as its running batch is full, so a request let go goes only into a free slot and never waits in the engine's first-come queue. See docs/admission.md#free-batch-slots.",
    default: 1,
    parse: integer(0, 1_000_000),
  },
  saturationKvUsage: {
    flag: "--saturation-kv-usage",
    arg: "<ratio>",
    description:
      "A worker is saturated when its engine's KV-cache usage (the last fresh reading) reaches this fraction (1 = never on this signal).",
    default: 0.9,
    parse: number(0.01, 1),
  },
  saturationPendingPrefillChars: {
    flag: "--saturation-pending-prefill-chars",
    arg: "<chars>",
    description:
      "A worker is saturated when this router's requests there without a first byte hold this many uncached prompt characters (the router's own estimate, always fresh; 0 = never on this signal).",
    default: 0,
    parse: integer(0, Number.MAX_SAFE_INTEGER),
  },
  tenantReserveSlots: {
    flag: "--tenant-reserve-slots",
    arg: "<n>",
    description:
      "With --queue-when-saturated, while other tenants are active: a tenant holding at least its fair share of the workers' batch slots (their caps ÷ the active tenants) waits while this many slots or fewer are free, so the others' next request finds a free slot at once instead of waiting for an end behind it (0 = off). None is kept where --engine-priority makes every engine preempt that tenant's work for the others. See docs/admission.md#a-free-slot-for-the-other-tenants.",
    default: 1,
    parse: integer(0, 1_000_000),
  },
  holdForFreeSlot: {
    flag: "--hold-for-free-slot",
    arg: "[bool]",
    description:
      "With --queue-when-saturated and --tenant-reserve-slots above 0, while other tenants are active: a request goes only into a free batch slot, whatever --saturation-queue-depth says; one that finds none waits in the router for the first slot to free on any worker instead of in one engine's first-come queue (false: the depth decides). See docs/admission.md#a-free-slot-for-the-other-tenants.",
    default: true,
    parse: flagValue,
  },
  tenantReservePace: {
    flag: "--tenant-reserve-pace",
    arg: "[bool]",
    description:
      "With --queue-when-saturated and --tenant-reserve-slots above 0, while other tenants are active: a tenant holding at least its fair share of the batch slots goes only into a free slot of a worker where none of the streams this router relays waits for its first byte (a non-streaming answer, or one relayed by nginx, shows it only at its end and is not counted), so the others' next request finds at most one of its prompts in prefill ahead of it instead of the several refilled into a burst of ends (false: into any free slot). None is paced this way where --engine-priority makes every engine preempt its work (that tenant is paced there anyway). See docs/admission.md#a-free-slot-for-the-other-tenants.",
    default: true,
    parse: flagValue,
  },
  maxQueuedPerTenant: {
    flag: "--max-queued-per-tenant",
    arg: "<n>",
    description:
      "Requests of one tenant that may wait in the queue (the whole queue is bounded by --queue-size); beyond it the lowest priority is refused with 429.",
    default: 256,
    parse: integer(1, 1_000_000),
  },
  queueTimeoutHeader: {
    flag: "--queue-timeout-header",
    arg: "<name>",
    description:
      "Request header with the longest wait in the queue for that request, in seconds; it can only shorten --queue-timeout-secs.",
    default: "x-queue-timeout-secs",
    parse: headerName,
  },
  tenantHeader: {
    flag: "--tenant-header",
    arg: "<name>",
    description:
      "Request header naming the tenant (fair share in the queue, metrics); without it the tenant is the API key's id (key-<hash>), else default.",
    default: "x-tenant-id",
    parse: headerName,
  },
  priorityHeader: {
    flag: "--priority-header",
    arg: "<name>",
    description:
      "Request header with the request's priority: an integer in [-100, 100], higher goes first (default 0; anything else counts as 0).",
    default: "x-priority",
    parse: headerName,
  },
  maxTenants: {
    flag: "--max-tenants",
    arg: "<n>",
    description:
      "Distinct tenants tracked at once (queue shares, metric labels); a new one beyond this counts as default until an idle one is forgotten.",
    default: 64,
    parse: integer(1, 10_000),
  },
  tenantQuotaFile: {
    flag: "--tenant-quota",
    arg: "<file>",
    description:
      "A JSON or YAML file of per-tenant quotas (tokens per minute, concurrent requests; `others` for tenants not listed); over one, 429 with Retry-After. Shared by the replicas through --state-url, else per process. Watched: a bad later version is logged and the last good one stands. Empty = none. See docs/admission.md#quotas.",
    default: "",
    parse: (raw) => raw.trim(),
  },
  enginePriority: {
    flag: "--engine-priority",
    arg: "[bool]",
    description:
      "Pass each request's priority (--priority-header) to the engine's own scheduler as the body's `priority` field, in the engine's convention (vLLM: lower first, start it with --scheduling-policy priority; SGLang: higher first, start it with --enable-priority-scheduling and without --schedule-low-priority-values-first). A body that names `priority` itself is left alone. With --queue-when-saturated, a request that outranks the lower-priority work saturating a worker goes there at once, and a tenant over its share of the batch slots reaches the engine the engine's preemption threshold + 1 lower while another tenant asks at its priority (so SGLang preempts its work for them). See docs/admission.md#engine-priority.",
    default: false,
    parse: flagValue,
  },
  queueWaitHeader: {
    flag: "--queue-wait-header",
    arg: "<name>",
    description:
      "Response header that says how long the request waited in the router's queue, in whole milliseconds (0 when it did not wait; sent on a refusal after waiting too). Empty = off. See docs/admission.md#observability.",
    default: undefined,
    parse: answerHeaderName,
  },
});
