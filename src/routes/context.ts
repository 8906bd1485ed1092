import type { Admission } from "../admission/admission.js";
import type { FleetCapacity } from "../admission/fleet-capacity.js";
import type { CacheLedger } from "../cache-account/cache-ledger.js";
import type { WorkerMembership } from "../discovery/membership.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { BodyBudget } from "../intake/body-budget.js";
import type { Intake } from "../intake/intake.js";
import type { ParsePool } from "../intake/parse-pool.js";
import type { KvEventsManager } from "../kv-events/manager.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import type { Forwarder } from "../proxy/forward.js";
import type { LeaderRelay } from "../proxy/leader-relay.js";
import type { RemoteRelays } from "../proxy/remote-relay.js";
import type { Scheduler } from "../scheduling/scheduler.js";
import type { ClusterTransport } from "../state/cluster-transport.js";
import type { RedisTransport } from "../state/redis-transport.js";
import type { Replication } from "../state/replication.js";
import type { StateFile } from "../state/state-file.js";
import type { StateSecret } from "../state/state-secret.js";
import type { Tracing } from "../tracing/request-trace.js";
import type { HealthChecker } from "../workers/health.js";
import type { EngineIntrospector } from "../workers/introspection.js";
import type { LoraLoader } from "../workers/lora-loader.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { ResponseHolders } from "../workers/response-holders.js";
import type { RouteOptions } from "./settings.js";

/** Lifecycle flags the routes read. */
export interface RouterState {
  shuttingDown: boolean;
  /** Data-plane requests being handled now (graceful shutdown waits for 0). */
  active: number;
}

/** What the routes share; built once by server.ts. */
export interface RouterContext {
  /** The routes' own options (routes/settings.ts), never the router's whole Config. */
  config: RouteOptions;
  logger: Logger;
  /** The per-request access line (logger.ts: accessLogger). */
  accessLog: Logger;
  metrics: Metrics;
  registry: WorkerRegistry;
  /** How workers join and leave at run time (admin API, discovery sources): one path. */
  membership: WorkerMembership;
  /** Which workers probably hold which prefixes (the policy reads it through the forwarder). */
  index: PrefixIndex;
  /** The data plane's policy and index together (the forwarder's; POST /debug/route asks it too). */
  decider: Scheduler;
  /** The data plane's forwarder: one worker per request, or a prefill/decode pair. */
  forwarder: Forwarder;
  /** Every request's cache account, summed (GET /debug/cache, the counters). */
  cacheLedger: CacheLedger;
  /** Turns each data-plane (and /debug/route) request into its RoutingRequest. */
  intake: Intake;
  /** Responses API: which worker produced each response relayed (intake routes on it). */
  responseHolders: ResponseHolders;
  admission: Admission;
  /** Router-wide memory budget for buffered request bodies (--max-body-buffer-bytes). */
  bodyBudget: BodyBudget;
  /** Child processes for large bodies (--parse-workers); undefined = every body parsed in line. */
  parsePool: ParsePool | undefined;
  health: HealthChecker;
  /** Reads the workers' engines (capacity, queue, KV usage, models) on a schedule. */
  introspection: EngineIntrospector;
  state: RouterState;
  /** --kv-events: the engines' KV-event feed (per-worker endpoints, stream state). */
  kvEvents?: KvEventsManager;
  /** What this replica shares with its peers (state/replication.ts), over one or both transports. */
  replication?: Replication;
  /** --state-url: the replication's Redis transport. */
  sharedState?: RedisTransport;
  /** The fleet saturation signal (radixgate_fleet_* metrics, GET /debug/capacity). */
  capacity: FleetCapacity;
  /** --state-file: the prefix index saved on stop and loaded on start. */
  stateFile?: StateFile;
  /** OpenTelemetry tracing (--otlp-endpoint, OTEL_*); undefined = off, and no span is made. */
  tracing?: Tracing;
  /** --lora-load-on-demand: loads a requested adapter no worker holds, before it is routed. */
  loraLoader?: LoraLoader;
  /** --state-advertise-url: requests sent to the leader replica (proxy/leader-relay.ts). */
  leaderRelay?: LeaderRelay;
  /**
   * --state-relay decisions, as the leader: the replicas' calls (routes/decision.ts) and the
   * attempts they carry; the fleet's secret checks each call's signature.
   */
  peerCalls?: { relays: RemoteRelays; secret: StateSecret };
  /** radixgate-cluster: the replication's transport to the sibling processes. */
  siblingState?: ClusterTransport;
}
