import { randomBytes } from "node:crypto";
import type { PrefixClaims } from "../index/prefix-claims.js";
import type { Logger } from "../logger.js";
import { type LeaderView, LoadSync, leadsPeers, loadTtlMs } from "./load-sync.js";
import { OpOrder } from "./op-order.js";
import { OpsPublisher } from "./ops-publisher.js";
import { OpsReader } from "./ops-reader.js";
import { RedisPrefixClaims } from "./prefix-claims.js";
import { RedisLink } from "./redis-link.js";
import { RedisSnapshot } from "./redis-snapshot.js";
import type { ReplicaSide, Transport } from "./replication.js";
import type { SharedStateOptions } from "./settings.js";
import { type StateKeys, stateKeys } from "./state-keys.js";
import { StateMetrics } from "./state-metrics.js";
import type { StateOp } from "./state-op.js";
import { StateSecret } from "./state-secret.js";
import { WorkersHash } from "./workers-hash.js";

/** How long start() waits for Redis and for the replay of recent decisions before serving. */
const START_WAIT_MS = 3000;

/**
 * The Redis transport (--state-url), across hosts: this replica's ops go to a stream every
 * replica reads (state/ops-publisher.ts, ops-reader.ts), each signed with --state-secret and
 * refused when written again (state/op-order.ts, --state-max-op-age-ms); the worker set is also
 * kept in a hash a starting replica loads (state/workers-hash.ts); claims are SET NX keys; each
 * replica's in-flight counts are a key of its own (state/load-sync.ts).
 *
 * Redis is never on a request's path: publishing is a queue push, peers' ops arrive on a
 * background reader, and while Redis is away the replica routes on what it knows.
 */
export class RedisTransport implements Transport {
  readonly source = "redis";
  readonly maxTextChars: number;
  /** This process's id among the replicas (new at every start). */
  readonly replicaId: string;
  readonly link: RedisLink;
  readonly publisher: OpsPublisher;
  readonly reader: OpsReader;
  /** Agreement on new prefixes; undefined when --state-claim-timeout-ms is 0. */
  readonly claims: PrefixClaims | undefined;
  private side: ReplicaSide | undefined;
  private metrics: StateMetrics | undefined;
  private workersHash: WorkersHash | undefined;
  private load: LoadSync | undefined;
  private readonly keys: StateKeys;
  private readonly sibling: ((replicaId: string) => boolean) | undefined;
  private readonly secret: StateSecret;
  /** Refuses ops and workers-hash values written again (state/op-order.ts). */
  private readonly order: OpOrder;
  /** The fleet's index snapshot (--state-snapshot-interval-ms). */
  readonly snapshot: RedisSnapshot;
  /** The reconcile under way since the link last came up (start() waits for the first). */
  private reconciling: Promise<void> | undefined;
  private stopping = false;
  /** How long a peer's decision counts as queued prefill without a load report covering it. */
  private readonly pendingTtlMs: number;

  constructor(
    readonly options: SharedStateOptions,
    private readonly logger: Logger,
  ) {
    const keys = stateKeys(options.keyPrefix);
    const group = options.replicaGroup;
    const hex = randomBytes(6).toString("hex");
    this.replicaId = group === undefined ? hex : `${group}.${hex}`;
    // The cluster's siblings reach this process over their channel: left out of what is read here.
    this.sibling =
      group === undefined
        ? undefined
        : (id: string) => id !== this.replicaId && id.startsWith(`${group}.`);
    this.keys = keys;
    this.maxTextChars = options.maxTextChars;
    this.pendingTtlMs = loadTtlMs(options.loadIntervalMs);
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
            onOutcome: (outcome, seconds) => {
              this.metrics?.claims.inc({ outcome });
              if (seconds !== undefined) this.metrics?.claimSeconds.observe(seconds);
            },
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
      apply: (op, from) => {
        // Only peers' decisions reach here (this replica's own are skipped by the reader).
        if (op.kind === "insert" || op.kind === "truncate")
          this.metrics?.opDelaySeconds.observe(Math.max(0, Date.now() - from.at) / 1000);
        // A removed worker's value goes too, should a refresh have written it back.
        if (op.kind === "remove") this.workersHash?.forget(op.url);
        this.side?.receive(op, {
          peer: redisPeer(from.replica),
          ttlMs: this.pendingTtlMs,
          seq: from.seq,
          at: from.at,
        });
      },
      ...(this.sibling !== undefined ? { skipIndexOpsOf: this.sibling } : {}),
      onApplied: (ops) => this.metrics?.applied.inc(ops),
      onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
      onReset: () => this.streamReset(),
    });
    this.snapshot = new RedisSnapshot(
      this.link,
      {
        keys,
        secret: this.secret,
        replicaId: this.replicaId,
        intervalMs: options.snapshotIntervalMs,
        maxBytes: options.snapshotMaxBytes,
        maxAgeMs: options.maxOpAgeMs,
        position: () => this.reader.position,
      },
      logger,
    );
  }

  publish(op: StateOp): void {
    this.publisher.publish(op);
  }

  /** The replicas (every host's, the cluster's siblings too) that started before this one. */
  rank(): number | undefined {
    return this.load?.rank;
  }

  /** The first-started live replica, and the URL it advertises (load-sync.ts). */
  leader(): LeaderView | undefined {
    return this.load?.leader;
  }

  /**
   * Publishes `url` as where peers reach this replica, as --state-advertise-url does: for a
   * replica that learns its URL only once it listens (port 0, in tests and benches).
   */
  advertise(url: string): void {
    this.load?.advertise(url);
    void this.load?.tick();
  }

  /** A request this replica relayed to the leader, or tried to and decided itself (fallback). */
  countRelay(outcome: "relayed" | "fallback"): void {
    this.metrics?.relays.inc({ outcome });
  }

  /** The ops stream went backwards: the reader starts over; membership is reconciled again. */
  private streamReset(): void {
    this.metrics?.resets.inc();
    this.logger.warn(
      { key_prefix: this.options.keyPrefix },
      "shared state: the ops stream was deleted or went backwards (Redis lost data, failover, or someone wrote to it); reading it again from its start",
    );
    const hash = this.workersHash;
    if (hash !== undefined && this.link.up) this.reconciling = hash.reconcile().catch(() => {});
  }

  /** Registers the metrics, the workers hash (when it carries the worker set) and the load keys. */
  attach(side: ReplicaSide): void {
    this.side = side;
    if (side.metricsRegistry !== undefined)
      this.metrics = new StateMetrics(side.metricsRegistry, {
        connected: () => this.link.up,
        pending: () => this.publisher.pending,
        leads: () => leadsPeers(this.leader()),
      });
    const { membership } = side;
    const hash =
      membership === undefined
        ? undefined
        : new WorkersHash(
            this.link,
            {
              keys: this.keys,
              registry: side.registry,
              membership,
              publisher: this.publisher,
              secret: this.secret,
              onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
              order: this.order,
              refreshMs: Math.max(1, Math.floor(this.options.maxOpAgeMs / 3)),
            },
            this.logger,
          );
    this.workersHash = hash;
    this.load = new LoadSync(this.link, {
      replicaId: this.replicaId,
      keys: this.keys,
      intervalMs: this.options.loadIntervalMs,
      workers: () => side.loadWorkers(),
      pending: side.pending,
      peerName: redisPeer,
      ...(this.sibling !== undefined ? { skipReplica: this.sibling } : {}),
      secret: this.secret,
      onRejected: (reason) => this.metrics?.rejected.inc({ reason }),
      advertiseUrl: this.options.advertiseUrl,
    });
    if (hash !== undefined)
      this.link.onChange((up) => {
        if (up) this.reconciling = hash.reconcile().catch(() => {});
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
    // The snapshot first (the workers are known now), then the ops after the position it covers.
    // A large one may outlast the wait: the replica serves meanwhile, and reads the ops once loaded.
    const index = this.side?.localIndex();
    const registry = this.side?.registry;
    const reading =
      connected && index !== undefined && registry !== undefined
        ? this.snapshot.load(index, registry).then((from) => {
            if (from !== undefined) this.reader.startAfter(from);
            this.startReading();
          })
        : Promise.resolve(this.startReading());
    this.load?.start();
    this.workersHash?.startRefresh();
    if (index !== undefined && registry !== undefined) this.snapshot.startRefresh(index, registry);
    if (connected) {
      await withDeadline(reading, deadline);
      await this.reader.caughtUp(Math.max(0, deadline - Date.now()));
    }
    this.logger.info(
      { replica: this.replicaId, connected, key_prefix: this.options.keyPrefix },
      "shared state started",
    );
  }

  private startReading(): void {
    if (!this.stopping) this.reader.start();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.workersHash?.stopRefresh();
    await this.snapshot.stop();
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

/** A Redis peer's name among every transport's peers (peer-pending.ts). */
function redisPeer(replicaId: string): string {
  return `redis:${replicaId}`;
}
