import { randomBytes } from "node:crypto";
import type { Registry } from "prom-client";
import type { PrefixClaims } from "../index/prefix-claims.js";
import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";
import { LoadSync } from "./load-sync.js";
import { MembershipSync } from "./membership-sync.js";
import { OpOrder } from "./op-order.js";
import { OpsPublisher } from "./ops-publisher.js";
import { OpsReader } from "./ops-reader.js";
import type { PeerInFlight } from "./peer-in-flight.js";
import { RedisPrefixClaims } from "./prefix-claims.js";
import { PublishingIndex } from "./publishing-index.js";
import { RedisLink } from "./redis-link.js";
import type { SharedStateOptions } from "./settings.js";
import { type StateKeys, stateKeys } from "./state-keys.js";
import { StateMetrics } from "./state-metrics.js";
import type { StateOp } from "./state-op.js";
import { StateSecret } from "./state-secret.js";

// The options type lives beside the state section's rows; importers keep finding it here.
export type { SharedStateOptions };

/** How long start() waits for Redis and for the replay of recent decisions before serving. */
const START_WAIT_MS = 3000;

/**
 * Everything one replica shares with the others through Redis (--state-url): the routing
 * decisions of its index, and claims on the new prefixes it routes (`claims`, for the decider).
 * The index stack (assembly/index-stack.ts) calls `wrapIndex` as its outermost layer, then
 * `attach` with the registry, which exists before the stack.
 *
 * Redis is never on a request's path: publishing is a queue push, peers' ops arrive on a
 * background reader, and while Redis is away the replica routes on what it knows.
 */
export class SharedState {
  /** This process's id among the replicas (new at every start). */
  readonly replicaId: string;
  readonly link: RedisLink;
  readonly publisher: OpsPublisher;
  readonly reader: OpsReader;
  /** Agreement on new prefixes; undefined when --state-claim-timeout-ms is 0. */
  readonly claims: PrefixClaims | undefined;
  private inner: PrefixIndex | undefined;
  private registry: WorkerRegistry | undefined;
  private metrics: StateMetrics | undefined;
  private membership: MembershipSync | undefined;
  private load: LoadSync | undefined;
  private readonly keys: StateKeys;
  private readonly sibling: ((replicaId: string) => boolean) | undefined;
  private readonly secret: StateSecret;
  /** Refuses ops and workers-hash values written again (state/op-order.ts). */
  private readonly order: OpOrder;
  /** The reconcile under way since the link last came up (start() waits for the first). */
  private reconciling: Promise<void> | undefined;

  constructor(
    readonly options: SharedStateOptions,
    private readonly logger: Logger,
  ) {
    const keys = stateKeys(options.keyPrefix);
    const group = options.replicaGroup;
    const hex = randomBytes(6).toString("hex");
    this.replicaId = group === undefined ? hex : `${group}.${hex}`;
    const sibling =
      group === undefined
        ? undefined
        : (id: string) => id !== this.replicaId && id.startsWith(`${group}.`);
    this.sibling = sibling;
    this.keys = keys;
    this.secret = new StateSecret(options.secret);
    this.order = new OpOrder(options.maxOpAgeMs);
    this.link = new RedisLink({ url: options.url, claimTimeoutMs: options.claimTimeoutMs }, logger);
    this.claims =
      options.claimTimeoutMs === 0
        ? undefined
        : new RedisPrefixClaims(this.link, {
            keys,
            ttlMs: options.claimTtlMs,
            timeoutMs: options.claimTimeoutMs,
            onOutcome: (outcome) => this.metrics?.claims.inc({ outcome }),
          });
    this.publisher = new OpsPublisher(this.link, {
      replicaId: this.replicaId,
      keys,
      secret: this.secret,
      queueSize: options.queueSize,
      streamLength: options.streamLength,
      onPublished: (ops, bytes) => {
        this.metrics?.published.inc(ops);
        this.metrics?.publishedBytes.inc(bytes);
      },
      onDropped: (ops) => this.metrics?.dropped.inc(ops),
      onStreamStuck: () =>
        this.logger.warn(
          { key_prefix: options.keyPrefix },
          "shared state: the ops stream takes no new entry (an entry at the largest possible ID was written to it); deleting it so that publishing goes on (the replicas read it again from its start)",
        ),
    });
    this.reader = new OpsReader(this.link, {
      replicaId: this.replicaId,
      keys,
      codec: { secret: this.secret, scope: keys.ops },
      maxTextChars: options.maxTextChars,
      order: this.order,
      apply: (op) => this.apply(op),
      ...(sibling !== undefined ? { skipIndexOpsOf: sibling } : {}),
      onApplied: (ops) => this.metrics?.applied.inc(ops),
      onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
      onReset: () => this.streamReset(),
    });
  }

  /** The ops stream went backwards: the reader starts over; membership is reconciled again. */
  private streamReset(): void {
    this.metrics?.resets.inc();
    this.logger.warn(
      { key_prefix: this.options.keyPrefix },
      "shared state: the ops stream was deleted or went backwards (Redis lost data, failover, or someone wrote to it); reading it again from its start",
    );
    const membership = this.membership;
    if (membership !== undefined && this.link.up)
      this.reconciling = membership.reconcile().catch(() => {});
  }

  /** The index the router should use: `index`, publishing its decisions. */
  wrapIndex(index: PrefixIndex): PrefixIndex {
    this.inner = index;
    return new PublishingIndex(
      index,
      (op) => this.publisher.publish(op),
      this.options.maxTextChars,
    );
  }

  /**
   * Connects the registry (its changes are published, peers' are applied to it; its workers'
   * in-flight counts are shared) and registers the metrics.
   */
  attach(
    registry: WorkerRegistry,
    metricsRegistry: Registry,
    hooks: {
      onRemoteAdd?: (worker: Worker) => void;
      /** Where peers' counts go when a second source (the cluster's siblings) adds its own. */
      peers?: PeerInFlight;
    } = {},
  ): void {
    this.registry = registry;
    this.metrics = new StateMetrics(metricsRegistry, {
      connected: () => this.link.up,
      pending: () => this.publisher.pending,
    });
    const membership = new MembershipSync(
      this.link,
      {
        keys: this.keys,
        registry,
        publisher: this.publisher,
        secret: this.secret,
        onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
        order: this.order,
        refreshMs: Math.max(1, Math.floor(this.options.maxOpAgeMs / 3)),
        ...(hooks.onRemoteAdd !== undefined ? { onRemoteAdd: hooks.onRemoteAdd } : {}),
      },
      this.logger,
    );
    this.membership = membership;
    this.load = new LoadSync(this.link, {
      replicaId: this.replicaId,
      keys: this.keys,
      intervalMs: this.options.loadIntervalMs,
      workers: () => {
        const peers = hooks.peers;
        if (peers === undefined) return registry.list();
        return registry.list().map((w) => ({
          id: w.id,
          ownInFlight: w.ownInFlight,
          setPeerInFlight: (n: number) => peers.set("redis", w, n),
        }));
      },
      ...(this.sibling !== undefined ? { skipReplica: this.sibling } : {}),
      secret: this.secret,
      onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
    });
    this.link.onChange((up) => {
      if (up) this.reconciling = membership.reconcile().catch(() => {});
    });
  }

  /**
   * Connects and replays the recent decisions, waiting at most a few seconds: a Redis that is
   * down or slow delays the start by that much at most, and never stops it.
   */
  async start(): Promise<void> {
    const deadline = Date.now() + START_WAIT_MS;
    const connected = await this.link.connect();
    if (connected && this.reconciling !== undefined) await withDeadline(this.reconciling, deadline);
    this.reader.start();
    this.load?.start();
    this.membership?.startRefresh();
    if (connected) await this.reader.caughtUp(Math.max(0, deadline - Date.now()));
    this.logger.info(
      { replica: this.replicaId, connected, key_prefix: this.options.keyPrefix },
      "shared state started",
    );
  }

  /** Applies a peer's op to this replica's own state, without publishing it again. */
  private apply(op: StateOp): void {
    const inner = this.inner;
    const registry = this.registry;
    if (inner === undefined || registry === undefined) return;
    switch (op.kind) {
      case "insert":
        if (registry.get(op.worker) !== undefined) inner.insert(op.worker, op.model, op.text);
        break;
      case "truncate":
        if (registry.get(op.worker) !== undefined)
          inner.truncate(op.worker, op.model, op.text, op.keep);
        break;
      case "add":
        void this.membership?.applyAdd(op.url, op.apiKey, op.role);
        break;
      case "remove":
        this.membership?.applyRemove(op.url);
        break;
    }
  }

  async stop(): Promise<void> {
    this.membership?.stopRefresh();
    await this.load?.stop();
    this.publisher.stop();
    const reading = this.reader.stop();
    await this.link.close();
    await reading;
  }
}

/** Waits for `work`, or until the epoch-ms deadline, whichever comes first. */
async function withDeadline(work: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    work,
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
    }),
  ]);
  clearTimeout(timer);
}
