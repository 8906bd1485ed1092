import type { Arity } from "../src/compat-flags.js";

/**
 * Every command-line flag of the current SGLang model gateway's Python launcher, in the order the
 * file declares them: sgl-project/sglang
 * sgl-model-gateway/bindings/python/src/sglang_router/router_args.py (`RouterArgs.add_cli_args`,
 * without the `--router-` prefix of `launch_server`) at commit
 * 6614f98405b9d58cf284fd1494dd9322e9d44f76. Arity follows argparse: store_true → none,
 * nargs "*"/"+" → many, otherwise one. `scripts/check-sglang-flags.ts <router_args.py>` compares
 * this list with a newer copy of that file.
 *
 * test/compat-flags.test.ts generates one test per flag from this list, so a flag the gateway
 * adds cannot go unhandled: each is a radixgate setting (SHARED_FLAGS), mapped, accepted with one
 * warning, or refused with a reason (COMPAT_FLAGS).
 */
export const SGLANG_GATEWAY_FLAGS: readonly { flag: string; arity: Arity }[] = [
  // Worker configuration
  { flag: "--host", arity: "one" },
  { flag: "--port", arity: "one" },
  { flag: "--worker-urls", arity: "many" },
  // Routing policy
  { flag: "--policy", arity: "one" },
  { flag: "--prefill-policy", arity: "one" },
  { flag: "--decode-policy", arity: "one" },
  { flag: "--cache-threshold", arity: "one" },
  { flag: "--balance-abs-threshold", arity: "one" },
  { flag: "--balance-rel-threshold", arity: "one" },
  { flag: "--bucket-adjust-interval-secs", arity: "one" },
  { flag: "--eviction-interval-secs", arity: "one" },
  { flag: "--max-tree-size", arity: "one" },
  { flag: "--max-idle-secs", arity: "one" },
  { flag: "--assignment-mode", arity: "one" },
  { flag: "--max-payload-size", arity: "one" },
  { flag: "--dp-aware", arity: "none" },
  { flag: "--enable-igw", arity: "none" },
  // PD disaggregation
  { flag: "--mini-lb", arity: "none" },
  { flag: "--pd-disaggregation", arity: "none" },
  { flag: "--prefill", arity: "many" },
  { flag: "--decode", arity: "one" },
  { flag: "--worker-startup-timeout-secs", arity: "one" },
  { flag: "--worker-startup-check-interval", arity: "one" },
  // Logging
  { flag: "--log-dir", arity: "one" },
  { flag: "--log-level", arity: "one" },
  // Service discovery (Kubernetes)
  { flag: "--service-discovery", arity: "none" },
  { flag: "--selector", arity: "many" },
  { flag: "--service-discovery-port", arity: "one" },
  { flag: "--service-discovery-namespace", arity: "one" },
  { flag: "--prefill-selector", arity: "many" },
  { flag: "--decode-selector", arity: "many" },
  // Prometheus
  { flag: "--prometheus-port", arity: "one" },
  { flag: "--prometheus-host", arity: "one" },
  { flag: "--prometheus-duration-buckets", arity: "many" },
  // Request handling
  { flag: "--request-id-headers", arity: "many" },
  { flag: "--request-timeout-secs", arity: "one" },
  { flag: "--shutdown-grace-period-secs", arity: "one" },
  { flag: "--cors-allowed-origins", arity: "many" },
  // Rate limiting
  { flag: "--max-concurrent-requests", arity: "one" },
  { flag: "--queue-size", arity: "one" },
  { flag: "--queue-timeout-secs", arity: "one" },
  { flag: "--rate-limit-tokens-per-second", arity: "one" },
  // Retries
  { flag: "--retry-max-retries", arity: "one" },
  { flag: "--retry-initial-backoff-ms", arity: "one" },
  { flag: "--retry-max-backoff-ms", arity: "one" },
  { flag: "--retry-backoff-multiplier", arity: "one" },
  { flag: "--retry-jitter-factor", arity: "one" },
  { flag: "--disable-retries", arity: "none" },
  // Circuit breaker
  { flag: "--cb-failure-threshold", arity: "one" },
  { flag: "--cb-success-threshold", arity: "one" },
  { flag: "--cb-timeout-duration-secs", arity: "one" },
  { flag: "--cb-window-duration-secs", arity: "one" },
  { flag: "--disable-circuit-breaker", arity: "none" },
  // Health checks
  { flag: "--health-failure-threshold", arity: "one" },
  { flag: "--health-success-threshold", arity: "one" },
  { flag: "--health-check-timeout-secs", arity: "one" },
  { flag: "--health-check-interval-secs", arity: "one" },
  { flag: "--health-check-endpoint", arity: "one" },
  { flag: "--disable-health-check", arity: "none" },
  // Tokenizer
  { flag: "--model-path", arity: "one" },
  { flag: "--tokenizer-path", arity: "one" },
  { flag: "--chat-template", arity: "one" },
  { flag: "--tokenizer-cache-enable-l0", arity: "none" },
  { flag: "--tokenizer-cache-l0-max-entries", arity: "one" },
  { flag: "--tokenizer-cache-enable-l1", arity: "none" },
  { flag: "--tokenizer-cache-l1-max-memory", arity: "one" },
  // Parsers
  { flag: "--reasoning-parser", arity: "one" },
  { flag: "--tool-call-parser", arity: "one" },
  { flag: "--mcp-config-path", arity: "one" },
  // Backend and history storage
  { flag: "--backend", arity: "one" },
  { flag: "--history-backend", arity: "one" },
  { flag: "--oracle-wallet-path", arity: "one" },
  { flag: "--oracle-tns-alias", arity: "one" },
  { flag: "--oracle-connect-descriptor", arity: "one" },
  { flag: "--oracle-username", arity: "one" },
  { flag: "--oracle-password", arity: "one" },
  { flag: "--oracle-pool-min", arity: "one" },
  { flag: "--oracle-pool-max", arity: "one" },
  { flag: "--oracle-pool-timeout-secs", arity: "one" },
  { flag: "--postgres-db-url", arity: "one" },
  { flag: "--postgres-pool-max", arity: "one" },
  { flag: "--redis-url", arity: "one" },
  { flag: "--redis-pool-max", arity: "one" },
  { flag: "--redis-retention-days", arity: "one" },
  // TLS / mTLS
  { flag: "--client-cert-path", arity: "one" },
  { flag: "--client-key-path", arity: "one" },
  { flag: "--ca-cert-paths", arity: "many" },
  { flag: "--tls-cert-path", arity: "one" },
  { flag: "--tls-key-path", arity: "one" },
  // Tracing
  { flag: "--enable-trace", arity: "none" },
  { flag: "--otlp-traces-endpoint", arity: "one" },
  // Control-plane authentication
  { flag: "--api-key", arity: "one" },
  { flag: "--control-plane-api-keys", arity: "many" },
  { flag: "--control-plane-audit-enabled", arity: "none" },
  { flag: "--jwt-issuer", arity: "one" },
  { flag: "--jwt-audience", arity: "one" },
  { flag: "--jwt-jwks-uri", arity: "one" },
  { flag: "--jwt-role-mapping", arity: "many" },
  // Newer than that commit: the gateway's ServerConfig has json_log and mesh_server_config
  // (sgl-model-gateway/src/server.rs at 049026958a37dfa6ac39a5ea150853aca1cbc07b), launched with
  // --json-log and --enable-mesh (store_true switches).
  { flag: "--json-log", arity: "none" },
  { flag: "--enable-mesh", arity: "none" },
];
