/**
 * Launch flags of SGLang's router / model gateway (and vllm-project/router, which forked it) that
 * radixgate spells differently or has no use for, so that an existing launch script runs unchanged.
 *
 * Source of the flag list: sgl-project/sglang
 * sgl-model-gateway/bindings/python/src/sglang_router/router_args.py (`RouterArgs.add_cli_args`,
 * the arguments of `python -m sglang_router.launch_router`) at commit 6614f984; the list checked
 * against it is test/sglang-gateway-flags.ts, and a test per flag keeps this table complete. Flags
 * radixgate shares under the same name (--worker-urls, --policy, --cache-threshold, ...) are plain
 * settings (src/config.ts SETTINGS), listed in SHARED_FLAGS below.
 */

import { UsageError } from "./errors.js";

/** How many values follow the flag on the command line (argparse store_true / type / nargs). */
export type Arity = "none" | "one" | "many";

export interface CompatFlag {
  flag: string;
  arity: Arity;
  /** The radixgate flag with the same meaning; absent when the flag is accepted and ignored. */
  ours?: string;
  /** Values for `ours` when they differ from the flag's own (a switch that sets a number). */
  translate?: (values: string[]) => string[];
  /** Why it is ignored (the reason only: the warning says "accepted and ignored"), or how the meaning maps; shown in docs/configuration.md. */
  note: string;
  /** Refused with this message instead: silently dropping it would route wrongly. */
  unsupported?: string;
}

const SERVER_TLS =
  "radixgate serves plain HTTP and would not be listening on TLS as asked; terminate TLS in front of it (a reverse proxy or load balancer)";
const CONTROL_PLANE_AUTH =
  "control-plane API keys with roles and JWT/OIDC are not supported, and accepting them would leave the admin API guarded differently than asked; use --admin-api-key (one bearer key for the admin API)";

/** Every entry: the SGLang flag, what radixgate does with it. */
export const COMPAT_FLAGS: readonly CompatFlag[] = [
  {
    flag: "--eviction-interval-secs",
    arity: "one",
    ours: "--eviction-interval",
    note: "Same meaning.",
  },
  {
    flag: "--retry-max-retries",
    arity: "one",
    ours: "--retry-max-attempts",
    note: "Same meaning: SGLang counts the first attempt too (--disable-retries equals 1).",
  },
  {
    flag: "--disable-retries",
    arity: "none",
    ours: "--retry-max-attempts",
    translate: () => ["1"],
    note: "Sets --retry-max-attempts 1.",
  },
  {
    flag: "--cb-timeout-duration-secs",
    arity: "one",
    ours: "--cb-timeout-secs",
    note: "Same meaning.",
  },
  {
    flag: "--disable-circuit-breaker",
    arity: "none",
    ours: "--cb-failure-threshold",
    translate: () => [String(Number.MAX_SAFE_INTEGER)],
    note: "A failure threshold that is never reached, as in SGLang.",
  },
  {
    flag: "--shutdown-grace-period-secs",
    arity: "one",
    ours: "--shutdown-grace-secs",
    note: "Same meaning; default 30 s instead of 180.",
  },
  {
    flag: "--disable-health-check",
    arity: "none",
    ours: "--health-check-interval-secs",
    translate: () => ["0"],
    note: "Sets --health-check-interval-secs 0: no health checks, workers are trusted as given (as in SGLang); the breaker still takes a failing worker out.",
  },
  {
    flag: "--retry-backoff-multiplier",
    arity: "one",
    note: "The backoff doubles each retry, with full jitter, between --retry-initial-backoff-ms and --retry-max-backoff-ms.",
  },
  {
    flag: "--retry-jitter-factor",
    arity: "one",
    note: "Full jitter (a uniform wait between 0 and the backoff).",
  },
  {
    flag: "--cb-window-duration-secs",
    arity: "one",
    note: "The breaker counts consecutive failures, not failures within a window.",
  },
  {
    flag: "--worker-startup-timeout-secs",
    arity: "one",
    note: "radixgate starts at once, probes every worker before it takes traffic, and a worker that is not up yet joins when it passes a health check.",
  },
  {
    flag: "--worker-startup-check-interval",
    arity: "one",
    note: "See --health-check-interval-secs.",
  },
  {
    flag: "--prometheus-duration-buckets",
    arity: "many",
    note: "The latency histograms (radixgate_request_duration_seconds, radixgate_time_to_first_byte_seconds) have fixed buckets.",
  },
  {
    flag: "--max-idle-secs",
    arity: "one",
    note: "The manual policy's idle expiry of routing keys; radixgate's manual policy forgets the least recently used key past 100000 (its manual-picker's maxKeys), and --session-affinity past --max-sessions.",
  },
  {
    flag: "--assignment-mode",
    arity: "one",
    note: "The manual policy's choice for a new routing key: radixgate's is random, SGLang's default.",
  },
  {
    flag: "--prometheus-host",
    arity: "one",
    note: "--prometheus-port listens on --host.",
  },
  {
    flag: "--log-dir",
    arity: "one",
    note: "Logs go to stdout (JSON lines); redirect or let systemd/Docker collect them.",
  },
  {
    flag: "--enable-igw",
    arity: "none",
    note: "Workers serving several models are routed by prefix as usual.",
  },
  {
    flag: "--rate-limit-tokens-per-second",
    arity: "one",
    note: "Admission is bounded by --max-concurrent-requests and --queue-size.",
  },
  {
    flag: "--bucket-adjust-interval-secs",
    arity: "one",
    note: "The bucket policy is a PD-mode prefill policy.",
  },
  {
    flag: "--model-path",
    arity: "one",
    note: "Routing works on characters, no tokenizer.",
  },
  { flag: "--chat-template", arity: "one", note: "No tokenizer or template." },
  { flag: "--tokenizer-cache-enable-l0", arity: "none", note: "No tokenizer." },
  { flag: "--tokenizer-cache-l0-max-entries", arity: "one", note: "No tokenizer." },
  { flag: "--tokenizer-cache-enable-l1", arity: "none", note: "No tokenizer." },
  { flag: "--tokenizer-cache-l1-max-memory", arity: "one", note: "No tokenizer." },
  {
    flag: "--reasoning-parser",
    arity: "one",
    note: "Responses pass through unparsed; start the engine with its own --reasoning-parser.",
  },
  {
    flag: "--tool-call-parser",
    arity: "one",
    note: "Responses pass through unparsed; start the engine with its own --tool-call-parser.",
  },
  { flag: "--mcp-config-path", arity: "one", note: "No MCP tool execution." },
  {
    flag: "--backend",
    arity: "one",
    note: "Any OpenAI-compatible worker (SGLang, vLLM) is served the same way.",
  },
  {
    flag: "--history-backend",
    arity: "one",
    note: "No conversation storage (the Responses API's stored state is the engine's).",
  },
  { flag: "--oracle-wallet-path", arity: "one", note: "No history storage." },
  { flag: "--oracle-tns-alias", arity: "one", note: "No history storage." },
  { flag: "--oracle-connect-descriptor", arity: "one", note: "No history storage." },
  { flag: "--oracle-username", arity: "one", note: "No history storage." },
  {
    flag: "--oracle-password",
    arity: "one",
    note: "No history storage (the value is never printed).",
  },
  { flag: "--oracle-pool-min", arity: "one", note: "No history storage." },
  { flag: "--oracle-pool-max", arity: "one", note: "No history storage." },
  { flag: "--oracle-pool-timeout-secs", arity: "one", note: "No history storage." },
  { flag: "--postgres-db-url", arity: "one", note: "No history storage." },
  { flag: "--postgres-pool-max", arity: "one", note: "No history storage." },
  {
    flag: "--redis-url",
    arity: "one",
    note: "No history storage (SGLang's Redis holds conversations; radixgate's replicas share routing state through --state-url).",
  },
  { flag: "--redis-pool-max", arity: "one", note: "No history storage." },
  { flag: "--redis-retention-days", arity: "one", note: "No history storage." },
  {
    flag: "--client-cert-path",
    arity: "one",
    note: "No mTLS to workers; terminate TLS in front of them or use --worker-api-key.",
  },
  { flag: "--client-key-path", arity: "one", note: "No mTLS to workers." },
  {
    flag: "--ca-cert-paths",
    arity: "many",
    note: "HTTPS workers are verified against Node's CA store (NODE_EXTRA_CA_CERTS adds one).",
  },
  {
    flag: "--enable-trace",
    arity: "none",
    note: "Tracing is on with --otlp-endpoint (OTLP/HTTP), docs/tracing.md.",
  },
  {
    flag: "--otlp-traces-endpoint",
    arity: "one",
    note: "sgl-router's is OTLP/gRPC; radixgate exports OTLP/HTTP: use --otlp-endpoint (docs/tracing.md).",
  },
  {
    flag: "--control-plane-audit-enabled",
    arity: "none",
    note: "No audit log; adding and removing a worker are logged (info), with the worker's id and URL.",
  },
  {
    flag: "--mini-lb",
    arity: "none",
    note: "MiniLB is SGLang's Python load balancer for PD mode; radixgate's own --pd-disaggregation serves instead.",
  },
  {
    flag: "--enable-mesh",
    arity: "none",
    note: "Refused.",
    unsupported:
      "SGLang's mesh (gateways gossiping their state to each other) is not implemented; radixgate replicas share workers, prefix claims and load through Redis: start each one with --state-url redis://... and the same --state-secret (docs/architecture.md)",
  },
  { flag: "--tls-cert-path", arity: "one", note: "Refused.", unsupported: SERVER_TLS },
  { flag: "--tls-key-path", arity: "one", note: "Refused.", unsupported: SERVER_TLS },
  {
    flag: "--control-plane-api-keys",
    arity: "many",
    note: "Refused.",
    unsupported: CONTROL_PLANE_AUTH,
  },
  { flag: "--jwt-issuer", arity: "one", note: "Refused.", unsupported: CONTROL_PLANE_AUTH },
  { flag: "--jwt-audience", arity: "one", note: "Refused.", unsupported: CONTROL_PLANE_AUTH },
  { flag: "--jwt-jwks-uri", arity: "one", note: "Refused.", unsupported: CONTROL_PLANE_AUTH },
  { flag: "--jwt-role-mapping", arity: "many", note: "Refused.", unsupported: CONTROL_PLANE_AUTH },
];

const BY_FLAG = new Map(COMPAT_FLAGS.map((c) => [c.flag, c]));

/** A compat flag that cannot be honoured; the CLI reports it like a bad value (exit 2). */
export class UnsupportedFlagError extends UsageError {
  constructor(flag: string, message: string) {
    super(flag, `${flag}: ${message}`);
    this.name = "UnsupportedFlagError";
  }
}

export interface TranslatedArgv {
  /** argv with SGLang spellings replaced by radixgate's and ignored flags removed. */
  argv: string[];
  /** One line per ignored flag, naming it (never its value, which may be a password). */
  warnings: string[];
}

/**
 * Rewrites SGLang router flags in argv into radixgate's. Values follow argparse's rules: `none`
 * takes nothing, `one` the next token (or `--flag=value`), `many` every token up to the next
 * `--flag`. Throws UnsupportedFlagError for a flag whose meaning radixgate cannot provide.
 */
export function translateCompatFlags(argv: readonly string[]): TranslatedArgv {
  const out: string[] = [];
  const warnings: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const token = argv[i]!;
    const eq = token.indexOf("=");
    const name = token.startsWith("--") && eq > 0 ? token.slice(0, eq) : token;
    const compat = BY_FLAG.get(name);
    if (!compat) {
      out.push(token);
      continue;
    }
    const values: string[] = [];
    if (eq > 0 && name !== token) values.push(token.slice(eq + 1));
    else if (compat.arity === "one" && i + 1 < argv.length) values.push(argv[++i]!);
    else if (compat.arity === "many") {
      while (i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) values.push(argv[++i]!);
    }
    if (compat.unsupported) throw new UnsupportedFlagError(compat.flag, compat.unsupported);
    if (compat.ours) {
      out.push(compat.ours, ...(compat.translate ? compat.translate(values) : values));
    } else {
      warnings.push(`${compat.flag} (SGLang router flag) accepted and ignored: ${compat.note}`);
    }
  }
  return { argv: out, warnings };
}

/**
 * SGLang router flags that are radixgate settings under the same name (src/config.ts SETTINGS), with what
 * differs, if anything. A test checks that each one is a real setting.
 */
export const SHARED_FLAGS: readonly { flag: string; note: string }[] = [
  { flag: "--host", note: "Same meaning." },
  { flag: "--port", note: "Same meaning." },
  { flag: "--worker-urls", note: "Same meaning; commas also separate URLs." },
  {
    flag: "--policy",
    note: "Same names (cache_aware, round_robin, random, power_of_two, prefix_hash, consistent_hashing, manual: x-smg-routing-key and x-smg-target-worker as SGLang reads them), plus least_load, prefix_cost and the seed systems' profiles; the default is prefix_cost here (SGLang: cache_aware), measured better or equal in docs/benchmarks.md. Pass --policy cache_aware for SGLang's behaviour. manual also keys on the --session-affinity session when the header is absent. bucket (a PD prefill policy) is refused.",
  },
  { flag: "--cache-threshold", note: "Same meaning." },
  {
    flag: "--service-discovery",
    note: "Same meaning: running, ready pods matching --selector are the workers (docs/discovery.md); terminating pods drain at once.",
  },
  { flag: "--selector", note: "Same meaning; commas also separate pairs." },
  { flag: "--service-discovery-port", note: "Same meaning; default 80, as SGLang." },
  { flag: "--service-discovery-namespace", note: "Same meaning; empty = every namespace." },
  {
    flag: "--prefill-selector",
    note: "Same meaning, with --pd-disaggregation (or --vllm-pd-disaggregation); the bootstrap port from the pod annotation sglang.ai/bootstrap-port, as SGLang.",
  },
  { flag: "--decode-selector", note: "Same meaning, with disaggregation." },
  {
    flag: "--pd-disaggregation",
    note: "Same meaning (docs/disaggregation.md); vLLM's P/D is --vllm-pd-disaggregation.",
  },
  {
    flag: "--prefill",
    note: "Same: URL [BOOTSTRAP_PORT], repeatable; BOOTSTRAP_PORT a number or none.",
  },
  { flag: "--decode", note: "Same: URL, repeatable." },
  { flag: "--prefill-policy", note: "Same; unset = --policy (prefix_cost by default)." },
  {
    flag: "--decode-policy",
    note: "Same; unset = --policy when it is a load policy, else least_load (SGLang: --policy).",
  },
  { flag: "--balance-abs-threshold", note: "Same meaning." },
  { flag: "--balance-rel-threshold", note: "Same meaning." },
  { flag: "--max-tree-size", note: "Same meaning (characters per worker)." },
  { flag: "--max-payload-size", note: "Same meaning; default 64 MiB instead of 512 MiB." },
  {
    flag: "--api-key",
    note: "Same meaning: the key clients must send, and the key sent to the --worker-urls workers (as SGLang does); an explicit --worker-api-key wins for the workers. Workers added through POST /workers use their own api_key, else --worker-api-key.",
  },
  { flag: "--log-level", note: "Same; SGLang's `warning` and `critical` mean `warn` and `fatal`." },
  {
    flag: "--cors-allowed-origins",
    note: "Same meaning and default (any origin); the admin API never answers cross-origin requests.",
  },
  { flag: "--json-log", note: "Same meaning: JSON lines, on a terminal too." },
  {
    flag: "--dp-aware",
    note: "Same meaning: requests go to each engine's data-parallel ranks (read from the engine), with a prefix tree per rank; the rank travels as X-data-parallel-rank (SGLang's and vLLM's OpenAI endpoints) or in SGLang's /generate body, and the worker URL stays one worker.",
  },
  { flag: "--prometheus-port", note: "Same; off unless given (SGLang defaults to 29000)." },
  {
    flag: "--request-id-headers",
    note: "Same meaning: the first header present becomes the request id.",
  },
  { flag: "--request-timeout-secs", note: "Same meaning." },
  { flag: "--retry-initial-backoff-ms", note: "Same meaning." },
  { flag: "--retry-max-backoff-ms", note: "Same meaning; default 5000 ms instead of 30000." },
  { flag: "--cb-failure-threshold", note: "Same meaning (consecutive failures); default 5." },
  { flag: "--cb-success-threshold", note: "Same meaning; default 2." },
  { flag: "--health-failure-threshold", note: "Same meaning." },
  { flag: "--health-success-threshold", note: "Same meaning." },
  { flag: "--health-check-timeout-secs", note: "Same meaning." },
  { flag: "--health-check-interval-secs", note: "Same meaning; default 10 s instead of 60." },
  { flag: "--health-check-endpoint", note: "Same meaning." },
  { flag: "--max-concurrent-requests", note: "Same; 0 or -1 = no limit (the default)." },
  { flag: "--queue-size", note: "Same meaning." },
  { flag: "--queue-timeout-secs", note: "Same meaning." },
  {
    flag: "--tokenizer-path",
    note: "Similar: a local tokenizer.json (or its directory) that tokenizes prompt strings in the router for the precise index; used only with --kv-events (ignored with a warning otherwise); a Hub model id is not fetched.",
  },
];

/** The compatibility table of docs/configuration.md: SGLang flag, ours, meaning, notes. */
export function compatTable(): string {
  const rows = [
    ...SHARED_FLAGS.map(
      (s) => `| \`${s.flag}\` | \`${s.flag}\` | same flag | ${s.note.replace(/\|/g, "\\|")} |`,
    ),
    ...COMPAT_FLAGS.map((c) => {
      const ours = c.ours ? `\`${c.ours}\`` : "none";
      const meaning = c.unsupported ? "refused (exit 2)" : c.ours ? "mapped" : "accepted, ignored";
      const note = (c.unsupported ? `${c.unsupported}.` : c.note).replace(/\|/g, "\\|");
      return `| \`${c.flag}\` | ${ours} | ${meaning} | ${note} |`;
    }),
  ];
  return [
    "| SGLang router flag | Ours | Meaning | Notes |",
    "| --- | --- | --- | --- |",
    ...rows,
  ].join("\n");
}
