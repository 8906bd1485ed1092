/**
 * The workers' settings, as the options of what workers/ builds: the registry's rules
 * (WorkersConfig), the health checker (HealthOptions), the circuit breaker (BreakerConfig) and the
 * reads of the engines (IntrospectionOptions).
 */
import { readFileSync } from "node:fs";
import {
  flagValue,
  integer,
  key,
  oneOf,
  type Parser,
  SEC,
  seconds,
  urlPath,
} from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import type { HealthOptions } from "./health.js";
import type { IntrospectionOptions } from "./introspection.js";
import type { LoraLoaderOptions } from "./lora-loader.js";
import { MODEL_ROUTING_MODES, type ModelRoutingMode } from "./served-models.js";
import { normalizeWorkerUrl } from "./worker-url.js";

/** One worker URL, normalized (normalizeWorkerUrl); a bad one is a ConfigError naming the flag. */
export function workerUrl(raw: string, flag: string): string {
  try {
    return normalizeWorkerUrl(raw);
  } catch (err) {
    throw new ConfigError(flag, (err as Error).message);
  }
}

/** Worker URLs, space- or comma-separated, each normalized (--worker-urls, --decode). */
export function workerUrls(raw: string, flag: string): string[] {
  return listItems(raw).map((t) => workerUrl(t, flag));
}

/** A flag's items, space- or comma-separated (--worker-urls, --lora-paths). */
function listItems(raw: string): string[] {
  return raw.split(/[\s,]+/).filter((t) => t !== "");
}

export interface WorkersConfig {
  /** Limit for opening a connection to a worker (requests, health checks, KV-event sockets). */
  connectTimeoutMs: number;
  /** Connections open to one worker at most (0 = no cap). */
  workerMaxConnections: number;
  allowLinkLocalWorkers: boolean;
  /** --worker-api-key: the key sent to workers added without one of their own. */
  workerApiKey: string | undefined;
  modelRouting: ModelRoutingMode;
  /** --worker-max-running: every worker's batch cap as the operator says it (0 = not said). */
  workerMaxRunning: number;
}

/** The circuit breaker of every worker (--cb-*). */
export interface BreakerConfig {
  failureThreshold: number;
  /** How long an open breaker waits before a trial request (half-open). */
  openMs: number;
  successThreshold: number;
}

export type HealthConfig = Required<HealthOptions>;
export type EnginePollConfig = Required<Omit<IntrospectionOptions, "maxBodyBytes">>;

export const WORKERS_SETTINGS = section<WorkersConfig>({
  connectTimeoutMs: {
    flag: "--connect-timeout-secs",
    arg: "<secs>",
    description: "Limit for opening a connection to a worker.",
    default: 5 * SEC,
    parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  },
  workerMaxConnections: {
    flag: "--worker-max-connections",
    arg: "<n>",
    description:
      "Connections the router keeps open to one worker at most, busy and idle together; a request beyond it waits for a free connection within its own timeouts (0 = no cap).",
    default: 1024,
    parse: integer(0),
  },
  allowLinkLocalWorkers: {
    flag: "--allow-link-local-workers",
    arg: "[bool]",
    description:
      "Accept workers at link-local or cloud metadata addresses (169.254.0.0/16, fe80::/10, metadata.google.internal), refused by default.",
    default: false,
    parse: flagValue,
  },
  workerApiKey: {
    flag: "--worker-api-key",
    arg: "<key>",
    description:
      "Bearer key the router sends to workers started with --api-key (requests and health checks); wins over --api-key for the --worker-urls workers; a worker added with its own api_key uses that. Never logged.",
    default: undefined,
    parse: key,
    secret: true,
  },
  workerMaxRunning: {
    flag: "--worker-max-running",
    arg: "<n>",
    description:
      "Requests each worker's engine runs at once (vLLM --max-num-seqs, SGLang --max-running-requests); a worker's own max_running (POST /workers, --worker-file) wins. With --queue-when-saturated, admission counts each worker's free batch slots from it before any reading, and from what SGLang's /get_server_info says or a reading learns otherwise (0 = not said). See docs/admission.md.",
    default: 0,
    parse: integer(0, 1_000_000),
  },
  modelRouting: {
    flag: "--model-routing",
    arg: "<mode>",
    description:
      "How a request's `model` picks workers. engine: as the engines treat names (a name some worker lists goes to those workers; a name none lists goes to the workers that accept any name, SGLang and workers listing no models; 404 only when there is none). strict: a name no worker lists gets the router's 404 once every worker's list is known.",
    default: "engine",
    parse: oneOf(MODEL_ROUTING_MODES),
  },
});

export const HEALTH_SETTINGS = section<HealthConfig>({
  intervalMs: {
    flag: "--health-check-interval-secs",
    arg: "<secs>",
    description: "Seconds between active GET /health checks of every worker (0 = off).",
    default: 10 * SEC,
    parse: seconds(0),
  },
  timeoutMs: {
    flag: "--health-check-timeout-secs",
    arg: "<secs>",
    description: "Limit for one health check.",
    default: 5 * SEC,
    parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  },
  failureThreshold: {
    flag: "--health-failure-threshold",
    arg: "<n>",
    description: "Consecutive failed checks that mark a worker unhealthy.",
    default: 3,
    parse: integer(1),
  },
  successThreshold: {
    flag: "--health-success-threshold",
    arg: "<n>",
    description: "Consecutive passed checks that mark an unhealthy worker healthy again.",
    default: 2,
    parse: integer(1),
  },
  deadGraceMs: {
    flag: "--dead-worker-grace-secs",
    arg: "<secs>",
    description:
      "A worker unhealthy for this long counts as dead: its prefix-index entries are dropped (and with --state-url its peers drop them too, so the shared snapshot leaves it out) and its rows of the cache account go. One healthy again sooner keeps them. 0 = never.",
    default: 120 * SEC,
    parse: seconds(0),
  },
  endpoint: {
    flag: "--health-check-endpoint",
    arg: "<path>",
    description: "Path of the health check, after the worker's base URL.",
    default: "/health",
    parse: urlPath,
  },
});

export const BREAKER_SETTINGS = section<BreakerConfig>({
  failureThreshold: {
    flag: "--cb-failure-threshold",
    arg: "<n>",
    description:
      "Consecutive request failures (connection errors, timeouts, 5xx; never 4xx) that open a worker's circuit breaker.",
    default: 5,
    parse: integer(1),
  },
  openMs: {
    flag: "--cb-timeout-secs",
    arg: "<secs>",
    description:
      "Seconds an open breaker waits before letting a trial request through (half-open).",
    default: 30 * SEC,
    parse: seconds(0),
  },
  successThreshold: {
    flag: "--cb-success-threshold",
    arg: "<n>",
    description: "Successful trial requests that close a half-open breaker.",
    default: 2,
    parse: integer(1),
  },
});

export const ENGINE_POLL_SETTINGS = section<EnginePollConfig>({
  intervalMs: {
    flag: "--engine-poll-interval-secs",
    arg: "<secs>",
    description:
      "Seconds between reads of every worker's engine signals (SGLang /get_server_info, /metrics, /v1/models), also read once a new worker passes its first health check (0 = off). Unhealthy workers are not read. Signals older than 3 intervals are ignored.",
    default: 5 * SEC,
    parse: seconds(0),
  },
  timeoutMs: {
    flag: "--engine-poll-timeout-secs",
    arg: "<secs>",
    description: "Limit for one read of one engine endpoint.",
    default: 2 * SEC,
    parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
  },
});

/** --lora-paths and the file of --lora-paths-file, as the loader takes them. */
export interface LoraConfig extends Omit<LoraLoaderOptions, "paths"> {
  loraLoadOnDemand: boolean;
  /** `name=path` entries. */
  loraPaths: string[];
  /** The entries of the file, read when the configuration is. */
  loraPathsFile: string[];
}

/** `name=path`, as SGLang's --lora-paths writes them; a bad entry is a ConfigError. */
function loraEntry(entry: string, flag: string): string {
  const eq = entry.indexOf("=");
  if (eq <= 0 || eq === entry.length - 1 || /\s/.test(entry))
    throw new ConfigError(flag, `"${entry}" is not name=path`);
  return entry;
}

const loraPaths: Parser<string[]> = (raw, flag) => listItems(raw).map((t) => loraEntry(t, flag));

/** A file of `name=path` lines (blank lines and `#` comments skipped) or a JSON object. */
const loraPathsFile: Parser<string[]> = (raw, flag) => {
  let text: string;
  try {
    text = readFileSync(raw, "utf8");
  } catch (err) {
    throw new ConfigError(flag, `cannot read ${raw}: ${(err as Error).message}`);
  }
  if (text.trimStart().startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw new ConfigError(flag, `${raw} is not JSON: ${(err as Error).message}`);
    }
    return Object.entries(parsed as Record<string, unknown>).map(([name, path]) =>
      loraEntry(`${name}=${typeof path === "string" ? path : ""}`, flag),
    );
  }
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && !line.startsWith("#"))
    .map((line) => loraEntry(line, flag));
};

/** The operator's adapters, name → path; a name given twice keeps its last path. */
export function loraPathMap(config: Pick<LoraConfig, "loraPaths" | "loraPathsFile">) {
  const map = new Map<string, string>();
  for (const entry of [...config.loraPathsFile, ...config.loraPaths]) {
    const eq = entry.indexOf("=");
    map.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return map;
}

export const LORA_SETTINGS = section<LoraConfig>(
  {
    loraLoadOnDemand: {
      flag: "--lora-load-on-demand",
      arg: "[bool]",
      description:
        "When a request names a LoRA adapter of --lora-paths that no available worker holds, load it on the worker with the most room through the engine's own route (vLLM /v1/load_lora_adapter, which needs VLLM_ALLOW_RUNTIME_LORA_UPDATING; SGLang /load_lora_adapter), then route it. Off by default. See docs/scheduling.md, LoRA adapters.",
      default: false,
      parse: flagValue,
    },
    loraPaths: {
      flag: "--lora-paths",
      arg: "<name=path...>",
      description:
        "The adapters --lora-load-on-demand may load: name=path, space- or comma-separated; the path as the engine reads it (its disk, or a Hugging Face id).",
      default: [],
      parse: loraPaths,
    },
    loraPathsFile: {
      flag: "--lora-paths-file",
      arg: "<file>",
      description:
        "A file of more --lora-paths: name=path lines (# comments), or a JSON object of name to path. Read once at start.",
      default: [],
      parse: loraPathsFile,
    },
    timeoutMs: {
      flag: "--lora-load-timeout-secs",
      arg: "<secs>",
      description:
        "Limit for loading one adapter (its unload to make room included), and for a request's wait for it.",
      default: 60 * SEC,
      parse: seconds(0, Number.POSITIVE_INFINITY, { minExclusive: true }),
    },
    maxInFlight: {
      flag: "--lora-max-loads-in-flight",
      arg: "<n>",
      description:
        "Adapter loads under way at once across the fleet; a load beyond waits within --lora-load-timeout-secs.",
      default: 2,
      parse: integer(1, 1024),
    },
    maxPerWorker: {
      flag: "--lora-max-adapters-per-worker",
      arg: "<n>",
      description:
        "Adapters one worker holds at most; at the bound, the adapter this router loaded there and used least recently is unloaded first. 0 = the engine's bound (SGLang --max-loaded-loras from /get_server_info), else none.",
      default: 0,
      parse: integer(0, 1_000_000),
    },
  },
  (c) => {
    if (c.loraLoadOnDemand && c.loraPaths.length === 0 && c.loraPathsFile.length === 0)
      throw new ConfigError(
        "--lora-load-on-demand",
        "needs the adapters it may load: --lora-paths name=path or --lora-paths-file",
      );
  },
);
