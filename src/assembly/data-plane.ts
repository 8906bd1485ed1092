/**
 * The data plane: the scheduler (policy + index + session table + the peers' claims) and the
 * forwarder that dispatches each decision. Metrics are counted through hooks, so proxy/ and
 * scheduling/ never import the metric set.
 */

import { registerAccountMetrics } from "../cache-account/account-metrics.js";
import { CacheLedger } from "../cache-account/cache-ledger.js";
import type { CacheAccountOptions } from "../cache-account/settings.js";
import { SGLANG_PAIRS } from "../disaggregation/sglang-pair.js";
import { VLLM_PAIRS } from "../disaggregation/vllm-pair.js";
import type { PrefixClaims } from "../index/prefix-claims.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { Metrics } from "../metrics.js";
import { Forwarder, type ForwardHooks, type ForwardSettings } from "../proxy/forward.js";
import { type AttemptSender, NodeAttempts } from "../proxy/send-attempt.js";
import type { Policy } from "../scheduling/policy.js";
import { Scheduler } from "../scheduling/scheduler.js";
import { SessionTable } from "../scheduling/session-table.js";
import { UsageFeedback } from "../scheduling/usage-feedback.js";
import type { WorkerRegistry } from "../workers/registry.js";

export interface DataPlaneOptions {
  readonly forward: ForwardSettings;
  /** --max-sessions; undefined when --session-affinity is off. */
  readonly maxSessions: number | undefined;
  /** The cache account (--explain-header, GET /debug/cache's window). */
  readonly cacheAccount: CacheAccountOptions;
  /**
   * Prefill/decode disaggregation (disaggregation/): the protocol and the decode side's policy;
   * `policy` is then the prefill side's. Undefined for a fleet of regular workers.
   */
  readonly pd?: { readonly protocol: "sglang" | "vllm"; readonly decodePolicy: Policy };
}

export interface DataPlaneDeps {
  readonly policy: Policy;
  readonly index: PrefixIndex;
  readonly registry: WorkerRegistry;
  readonly metrics: Metrics;
  /** --state-url: agreement with the peers on new prefixes. */
  readonly claims: PrefixClaims | undefined;
  /** This router's rank among its replicas (state/replication.ts Replication.rank). */
  readonly replicaRank?: (() => number) | undefined;
  /** --state-rank-hold-ms, with replicas (Scheduler.rankHoldMs). */
  readonly rankHoldMs?: number | undefined;
  /** The cache account's debug lines. */
  readonly logger: Logger;
  /** --data-plane nginx: nginx relays each attempt (proxy/remote-relay.ts); else this process. */
  readonly sender?: AttemptSender | undefined;
}

export interface DataPlane {
  readonly decider: Scheduler;
  readonly forwarder: Forwarder;
  readonly cacheLedger: CacheLedger;
}

export function buildDataPlane(options: DataPlaneOptions, deps: DataPlaneDeps): DataPlane {
  const { registry, index, metrics: m } = deps;
  const hooks: ForwardHooks = {
    onRetry: (endpoint) => m.retries.inc({ endpoint }),
    onUpstreamError: (worker, kind) => m.upstreamErrors.inc({ worker: worker.id, kind }),
    onDecision: (policy, branch, matchRate) => {
      m.decisions.inc({ policy, branch });
      if (matchRate !== null) m.matchRate.observe(matchRate);
    },
  };
  const feedback = new UsageFeedback({
    onEngineTokens: (worker, prompt, cached) => {
      m.enginePromptTokens.inc({ worker: worker.id }, prompt);
      m.engineCachedTokens.inc({ worker: worker.id }, cached);
    },
    onCorrection: (worker) => m.feedbackCorrections.inc({ worker: worker.id }),
  });
  const decider = new Scheduler(
    deps.policy,
    index,
    options.maxSessions === undefined ? undefined : new SessionTable(options.maxSessions),
    deps.claims,
    feedback,
    registry,
  );
  decider.replicaRank = deps.replicaRank;
  decider.rankHoldMs = deps.rankHoldMs ?? 0;
  const cacheLedger = new CacheLedger(options.cacheAccount, deps.logger);
  registerAccountMetrics(m.registry, cacheLedger.totals);
  // --cache-account false: the forwarder gets no ledger (the counters and /debug/cache stay empty).
  const accounting = options.cacheAccount.enabled ? cacheLedger : undefined;
  const pd = options.pd;
  // With disaggregation, the decider picks the prefill side and a load policy the decode side;
  // the engines' protocol sends the pair (disaggregation/), through the same retry loop.
  const forwarder = new Forwarder(
    registry,
    decider,
    options.forward,
    hooks,
    deps.sender ?? new NodeAttempts(options.forward.maxCoolDownMs),
    accounting,
    pd === undefined
      ? undefined
      : {
          decodeDecider: new Scheduler(
            pd.decodePolicy,
            index,
            undefined,
            undefined,
            undefined,
            registry,
          ),
          protocol: pd.protocol === "sglang" ? SGLANG_PAIRS : VLLM_PAIRS,
        },
  );
  return { decider, forwarder, cacheLedger };
}
