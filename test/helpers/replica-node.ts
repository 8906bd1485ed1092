import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { followWorkers } from "../../src/index/follow-workers.js";
import { createLogger } from "../../src/logger.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { Replication, type Transport } from "../../src/state/replication.js";
import { NEUTRAL, type WorkerLease } from "../../src/workers/lease.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

/** A forked replica's --state-claim-timeout-ms, set by the test that forks it (2 s if unset). */
export const CLAIM_TIMEOUT_ENV = "RG_TEST_CLAIM_TIMEOUT_MS";
/** A forked replica's --state-rank-hold-ms (0 if unset). */
export const RANK_HOLD_ENV = "RG_TEST_RANK_HOLD_MS";

/** What a test asks of one replica (the same over every transport; sent over IPC as JSON). */
export type ReplicaCommand =
  | { readonly op: "add"; readonly url: string }
  | { readonly op: "remove"; readonly url: string }
  /** Adds the worker and routes `text` to it in the same turn (its decision right behind it). */
  | { readonly op: "addAndInsert"; readonly url: string; readonly text: string }
  | { readonly op: "insert"; readonly url: string; readonly text: string }
  | { readonly op: "truncate"; readonly url: string; readonly text: string; readonly keep: number }
  /** Characters of `text` the index says the worker holds (-1: no such worker here). */
  | { readonly op: "match"; readonly url: string; readonly text: string }
  | { readonly op: "workers" }
  | { readonly op: "claim"; readonly key: string; readonly value: string }
  /** Takes `n` requests' load on the worker (held until "finish"). */
  | { readonly op: "dispatch"; readonly url: string; readonly n: number }
  | { readonly op: "finish" }
  | { readonly op: "peerInFlight"; readonly url: string }
  /**
   * Routes `text` to the worker as a decision does: inserted with the `uncached` characters it
   * queues there, then the request's load taken (held until "finish", which is its first byte).
   */
  | {
      readonly op: "decide";
      readonly url: string;
      readonly text: string;
      readonly uncached: number;
    }
  /** The other replicas' queued prefill on the worker, as "chars/requests" ("" : no such worker). */
  | { readonly op: "peerPending"; readonly url: string }
  /** This replica's rank among its peers (Replication.rank). */
  | { readonly op: "rank" }
  /**
   * Decides `text` as the request path does (prefix_cost, agreed with the replicas on a new
   * prefix) and takes its load: "<worker url> <branch>".
   */
  | { readonly op: "route"; readonly text: string };

export type ReplicaAnswer = string | number | string[] | null;

/**
 * One replica as the replication sees it, without HTTP: a registry, an index and the
 * replication over `transport`, as assembly/index-stack.ts builds them.
 */
export class ReplicaNode {
  readonly registry = new WorkerRegistry(
    { breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 }, connectTimeoutMs: 1000 },
    // Every host name is 127.0.0.1, known a little later (a peer's add waits for it).
    { resolveHost: () => new Promise((resolve) => setTimeout(() => resolve(["127.0.0.1"]), 100)) },
  );
  readonly replication: Replication;
  private readonly index: ReturnType<Replication["wrapIndex"]>;
  private readonly leases: WorkerLease[] = [];

  /** The request path's scheduler over this replica's index and claims ("route"). */
  private readonly scheduler: Scheduler;

  /** `rankHoldMs`: the scheduler's --state-rank-hold-ms ("route"). */
  constructor(
    readonly transport: Transport,
    rankHoldMs = 0,
  ) {
    const base = new ApproximateIndex({});
    this.replication = new Replication([transport], {
      registry: this.registry,
      logger: createLogger({ level: "silent" }),
    });
    this.index = this.replication.wrapIndex(base);
    followWorkers(this.index, this.registry);
    this.replication.attach();
    this.scheduler = new Scheduler(
      createPolicy("prefix_cost"),
      this.index,
      undefined,
      this.replication.claims,
    );
    this.scheduler.replicaRank = () => this.replication.rank();
    this.scheduler.rankHoldMs = rankHoldMs;
  }

  async start(): Promise<void> {
    await this.transport.start();
  }

  async stop(): Promise<void> {
    for (const lease of this.leases) lease.finish(NEUTRAL);
    await this.transport.stop();
    await this.registry.close();
  }

  private id(url: string): string {
    const worker = this.registry.get(url);
    if (worker === undefined) throw new Error(`no worker ${url} here`);
    return worker.id;
  }

  async run(command: ReplicaCommand): Promise<ReplicaAnswer> {
    switch (command.op) {
      case "add":
        return this.registry.add(command.url).id;
      case "remove":
        this.registry.remove(command.url);
        return null;
      case "addAndInsert":
        this.index.insert(this.registry.add(command.url).id, undefined, command.text);
        return null;
      case "insert":
        this.index.insert(this.id(command.url), undefined, command.text);
        return null;
      case "truncate":
        this.index.truncate(this.id(command.url), undefined, command.text, command.keep);
        return null;
      case "match": {
        const worker = this.registry.get(command.url);
        if (worker === undefined) return -1;
        const out = [0];
        this.index.match(command.text, undefined, [worker], out);
        return out[0] ?? 0;
      }
      case "workers":
        return this.registry
          .list()
          .map((w) => w.url)
          .sort();
      case "claim":
        return (await this.replication.claims?.claim(command.key, command.value)) ?? null;
      case "dispatch": {
        const worker = this.registry.get(command.url);
        if (worker === undefined) throw new Error(`no worker ${command.url} here`);
        for (let i = 0; i < command.n; i++)
          this.leases.push(worker.dispatch({ textChars: 10, uncachedChars: 10 }));
        return null;
      }
      case "finish":
        for (const lease of this.leases.splice(0)) lease.finish(NEUTRAL);
        return null;
      case "peerInFlight":
        return this.registry.get(command.url)?.peerInFlight ?? -1;
      case "decide": {
        const worker = this.registry.get(command.url);
        if (worker === undefined) throw new Error(`no worker ${command.url} here`);
        this.index.insert(worker.id, undefined, command.text, command.uncached);
        this.leases.push(
          worker.dispatch({ textChars: command.text.length, uncachedChars: command.uncached }),
        );
        return null;
      }
      case "rank":
        return this.replication.rank();
      case "route": {
        const candidates = [...this.registry.list()].sort((x, y) => x.url.localeCompare(y.url));
        const decision = await this.scheduler.decideAgreed(candidates, { text: command.text });
        if (decision === undefined) return null;
        this.leases.push(
          decision.worker.dispatch({
            textChars: command.text.length,
            uncachedChars: command.text.length - decision.heldBefore,
          }),
        );
        return `${decision.worker.url} ${decision.branch}`;
      }
      case "peerPending": {
        const worker = this.registry.get(command.url);
        if (worker === undefined) return "";
        return `${worker.peerPendingPrefillChars}/${worker.peerPendingPrefillRequests}`;
      }
    }
  }
}
