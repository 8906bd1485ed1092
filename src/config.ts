/**
 * The router's configuration: each feature's options, nested by feature, from the settings rows
 * each feature folder owns (<feature>/settings.ts, built with config-kit/). This file only places
 * the sections; a new setting goes into its feature's rows (docs/architecture.md, "Adding a setting").
 */
import { FLEET_SETTINGS, type FleetConfig } from "./admission/fleet-settings.js";
import { ADMISSION_SETTINGS, type AdmissionConfig } from "./admission/settings.js";
import { CACHE_ACCOUNT_SETTINGS, type CacheAccountConfig } from "./cache-account/settings.js";
import type { FlagValues, RawValues, Sections } from "./config-kit/table.js";
import {
  checkAll,
  defaultsOf,
  flagRows,
  flagValuesOf,
  parseRaw,
  withFlagValues,
} from "./config-kit/table.js";
import {
  PD_SETTINGS,
  type PdConfig,
  pdEnabled,
  validatePdConfig,
} from "./disaggregation/settings.js";
import {
  KUBERNETES_SETTINGS,
  type KubernetesDiscoverySettings,
  validateKubernetesSettings,
} from "./discovery/kubernetes-settings.js";
import { DISCOVERY_SETTINGS, type DiscoveryConfig } from "./discovery/settings.js";
import { ConfigError } from "./errors.js";
import { INDEX_SETTINGS, type IndexConfig } from "./index/settings.js";
import { INTAKE_SETTINGS, type IntakeConfig } from "./intake/settings.js";
import { KV_EVENTS_SETTINGS, type KvEventsConfig } from "./kv-events/settings.js";
import { NGINX_SETTINGS, type NginxConfigRows } from "./nginx/settings.js";
import { PROXY_SETTINGS, type ProxyConfig } from "./proxy/settings.js";
import { ROUTES_SETTINGS, type RoutesConfig } from "./routes/settings.js";
import {
  POLICIES_SETTINGS,
  type PoliciesConfig,
  SCHEDULING_SETTINGS,
  type SchedulingConfig,
} from "./scheduling/settings.js";
import { SERVER_SETTINGS, type ServerConfig } from "./server-settings.js";
import { STATE_SETTINGS, type StateConfig } from "./state/settings.js";
import { TRACING_SETTINGS, type TracingConfig } from "./tracing/settings.js";
import {
  BREAKER_SETTINGS,
  type BreakerConfig,
  ENGINE_POLL_SETTINGS,
  type EnginePollConfig,
  HEALTH_SETTINGS,
  type HealthConfig,
  LORA_SETTINGS,
  type LoraConfig,
  WORKERS_SETTINGS,
  type WorkersConfig,
} from "./workers/settings.js";

export { envName } from "./config-kit/parsers.js";
export type { FlagValues, RawValues } from "./config-kit/table.js";

/** The router's whole configuration, after parsing and validation: one section per feature. */
export interface Config {
  discovery: DiscoveryConfig;
  kubernetes: KubernetesDiscoverySettings;
  server: ServerConfig;
  policies: PoliciesConfig;
  scheduling: SchedulingConfig;
  index: IndexConfig;
  engines: EnginePollConfig;
  intake: IntakeConfig;
  proxy: ProxyConfig;
  admission: AdmissionConfig;
  fleet: FleetConfig;
  health: HealthConfig;
  breaker: BreakerConfig;
  workers: WorkersConfig;
  lora: LoraConfig;
  routes: RoutesConfig;
  kvEvents: KvEventsConfig;
  state: StateConfig;
  disaggregation: PdConfig;
  cacheAccount: CacheAccountConfig;
  tracing: TracingConfig;
  dataPlane: NginxConfigRows;
}

/** Every feature's rows, in the order `--help` and docs/configuration.md show them. */
export const SECTIONS: Sections<Config> = {
  discovery: DISCOVERY_SETTINGS,
  kubernetes: KUBERNETES_SETTINGS,
  server: SERVER_SETTINGS,
  policies: POLICIES_SETTINGS,
  scheduling: SCHEDULING_SETTINGS,
  index: INDEX_SETTINGS,
  engines: ENGINE_POLL_SETTINGS,
  intake: INTAKE_SETTINGS,
  proxy: PROXY_SETTINGS,
  admission: ADMISSION_SETTINGS,
  fleet: FLEET_SETTINGS,
  health: HEALTH_SETTINGS,
  breaker: BREAKER_SETTINGS,
  workers: WORKERS_SETTINGS,
  lora: LORA_SETTINGS,
  routes: ROUTES_SETTINGS,
  kvEvents: KV_EVENTS_SETTINGS,
  state: STATE_SETTINGS,
  disaggregation: PD_SETTINGS,
  cacheAccount: CACHE_ACCOUNT_SETTINGS,
  tracing: TRACING_SETTINGS,
  dataPlane: NGINX_SETTINGS,
};

/** Every setting as the command line sees it: flag, env variable name, default in the flag's unit. */
export const SETTINGS = flagRows(SECTIONS);

export function defaultConfig(): Config {
  return defaultsOf(SECTIONS);
}

/** Checks that involve more than one setting: each feature's, then those across features. */
export function validateConfig(config: Config): Config {
  checkAll(SECTIONS, config);
  validateKubernetesSettings({ ...config.kubernetes, ...config.disaggregation });
  validatePdConfig({ ...config.disaggregation, workerUrls: config.discovery.workerUrls });
  if (config.dataPlane.dataPlane === "nginx" && pdEnabled(config.disaggregation)) {
    // nginx relays one worker's answer; a pair's hand-off (two requests, a body rewrite per side)
    // stays with the Node.js data plane.
    throw new ConfigError(
      "--data-plane",
      "nginx does not relay prefill/decode pairs yet: use --data-plane node with --pd-disaggregation or --vllm-pd-disaggregation",
    );
  }
  if (config.dataPlane.dataPlane === "nginx" && config.state.advertiseUrl !== undefined) {
    // nginx asks this replica only where to send a request and carries its bytes itself: the
    // relay stage would send nginx's decision call whole to the leader and answer it with a reply.
    throw new ConfigError(
      "--state-advertise-url",
      "relaying requests to the leader replica needs --data-plane node: nginx carries the bytes itself and asks radixgate only for decisions",
    );
  }
  return config;
}

/**
 * Builds a Config from raw strings keyed by setting name (from flags or env), applying defaults.
 * Throws ConfigError naming the flag on the first invalid value.
 */
export function parseConfig(raw: RawValues): Config {
  return validateConfig(parseRaw(SECTIONS, raw));
}

/**
 * The defaults (or `base`) with some settings changed, by setting name and in the flags' units:
 * `configWith({ requestTimeoutSecs: 2 })`. For tests, benches and the demo; not validated.
 */
export function configWith(values: FlagValues, base: Config = defaultConfig()): Config {
  return withFlagValues(SECTIONS, base, values);
}

/** The configuration by setting name, in the flags' units (`{ requestTimeoutSecs: 1800, ... }`). */
export function flagValues(config: Config): Record<string, unknown> {
  return flagValuesOf(SECTIONS, config);
}

/** Settings by name in the flags' units, for configWith (tests, benches, the demo). */
export type ConfigOverrides = Record<string, unknown>;
