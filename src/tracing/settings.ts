/**
 * OpenTelemetry tracing's settings row (--otlp-endpoint), placed by config.ts as Config.tracing,
 * and the standard OTEL_* variables it reads at start. Nothing here loads the SDK.
 */
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";

/** The flag's value, as config.ts's Config carries it. */
export interface TracingConfig {
  /** --otlp-endpoint: the collector's OTLP/HTTP base URL; undefined = the OTEL_* variables decide. */
  otlpEndpoint: string | undefined;
}

export type OtlpProtocol = "http/protobuf" | "http/json";

/** The sampler of the OTel specification's OTEL_TRACES_SAMPLER (its names). */
export type SamplerName =
  | "always_on"
  | "always_off"
  | "traceidratio"
  | "parentbased_always_on"
  | "parentbased_always_off"
  | "parentbased_traceidratio";

const SAMPLERS: readonly SamplerName[] = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

/** What tracing starts with (tracing on); see tracingOptions. */
export interface TracingOptions {
  /** Where spans are POSTed: the traces URL itself (…/v1/traces). */
  readonly url: string;
  readonly protocol: OtlpProtocol;
  readonly serviceName: string;
  readonly sampler: SamplerName;
  /** The ratio of the traceidratio samplers, in [0, 1]. */
  readonly ratio: number;
}

const TRACES_PATH = "/v1/traces";

/** A base URL gets the signal's path (as OTEL_EXPORTER_OTLP_ENDPOINT does); a traces URL stays. */
function tracesUrl(base: string): string {
  const url = new URL(base);
  if (url.pathname.endsWith(TRACES_PATH)) return url.href;
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${TRACES_PATH}`;
  return url.href;
}

function httpUrl(raw: string, flag: string): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw new ConfigError(flag, `must be an http(s) URL, got "${raw}"`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new ConfigError(flag, `must be an http(s) URL (OTLP/HTTP), got "${raw}"`);
  }
  return url.href;
}

function endpointSetting(raw: string, flag: string): string | undefined {
  if (raw.trim() === "") return undefined;
  return httpUrl(raw, flag);
}

const set = (value: string | undefined): string | undefined =>
  value === undefined || value.trim() === "" ? undefined : value.trim();

/**
 * Tracing's options, or undefined when tracing is off: on with --otlp-endpoint, or with the
 * standard OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the traces URL as is) or OTEL_EXPORTER_OTLP_ENDPOINT
 * (a base: /v1/traces is appended); OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none keep it
 * off. The service name, protocol and sampler come from OTEL_SERVICE_NAME,
 * OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL and OTEL_TRACES_SAMPLER[_ARG]. A bad value is a ConfigError.
 */
export function tracingOptions(
  config: TracingConfig,
  env: NodeJS.ProcessEnv,
): TracingOptions | undefined {
  if (set(env.OTEL_SDK_DISABLED)?.toLowerCase() === "true") return undefined;
  if (set(env.OTEL_TRACES_EXPORTER)?.toLowerCase() === "none") return undefined;
  const tracesEnv = set(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
  const baseEnv = set(env.OTEL_EXPORTER_OTLP_ENDPOINT);
  let url: string;
  if (config.otlpEndpoint !== undefined) url = tracesUrl(config.otlpEndpoint);
  else if (tracesEnv !== undefined) url = httpUrl(tracesEnv, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  else if (baseEnv !== undefined) url = tracesUrl(httpUrl(baseEnv, "OTEL_EXPORTER_OTLP_ENDPOINT"));
  else return undefined;
  return {
    url,
    protocol: protocol(env),
    serviceName: set(env.OTEL_SERVICE_NAME) ?? "radixgate",
    ...sampler(env),
  };
}

function protocol(env: NodeJS.ProcessEnv): OtlpProtocol {
  const name = set(env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL)
    ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
    : "OTEL_EXPORTER_OTLP_PROTOCOL";
  const raw = set(env[name]) ?? "http/protobuf";
  if (raw === "http/protobuf" || raw === "http/json") return raw;
  throw new ConfigError(
    name,
    `must be http/protobuf or http/json (the router exports OTLP over HTTP only), got "${raw}"`,
  );
}

function sampler(env: NodeJS.ProcessEnv): { sampler: SamplerName; ratio: number } {
  const raw = set(env.OTEL_TRACES_SAMPLER)?.toLowerCase() ?? "parentbased_always_on";
  if (!(SAMPLERS as readonly string[]).includes(raw)) {
    throw new ConfigError(
      "OTEL_TRACES_SAMPLER",
      `must be one of ${SAMPLERS.join(", ")}, got "${raw}"`,
    );
  }
  const arg = set(env.OTEL_TRACES_SAMPLER_ARG);
  const ratio = arg === undefined ? 1 : Number(arg);
  if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
    throw new ConfigError("OTEL_TRACES_SAMPLER_ARG", `must be a number in [0, 1], got "${arg}"`);
  }
  return { sampler: raw as SamplerName, ratio };
}

export const TRACING_SETTINGS = section<TracingConfig>({
  otlpEndpoint: {
    flag: "--otlp-endpoint",
    arg: "<url>",
    description:
      "OpenTelemetry tracing: the collector's OTLP/HTTP URL (/v1/traces is appended unless given). Unset = off, unless OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER(_ARG) and OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL apply. See docs/tracing.md.",
    default: undefined,
    parse: endpointSetting,
  },
});
