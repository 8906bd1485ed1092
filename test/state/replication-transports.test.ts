import cluster, { type Worker as ClusterWorker } from "node:cluster";
import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { defaultConfig } from "../../src/config.js";
import { createLogger } from "../../src/logger.js";
import {
  CLAIM_BLOCK_CHARS,
  newPrefixClaimKey,
  newPrefixClaimValue,
} from "../../src/scheduling/new-prefix-claim.js";
import {
  CLUSTER_GROUP_ENV,
  CLUSTER_SEAT_ENV,
  connectToHub,
} from "../../src/state/cluster-channel.js";
import { SiblingHub } from "../../src/state/cluster-hub.js";
import { RedisTransport } from "../../src/state/redis-transport.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import {
  CLAIM_TIMEOUT_ENV,
  RANK_HOLD_ENV,
  type ReplicaAnswer,
  type ReplicaCommand,
  ReplicaNode,
} from "../helpers/replica-node.js";
import { waitFor } from "../helpers/router.js";

// The replication module's behaviour, one suite run over each transport: Redis streams (a real
// redis-server) and radixgate-cluster's channel (real node:cluster IPC, this process as the
// primary, each replica a forked process).

/** One replica, driven the same way whatever carries its state. */
interface Replica {
  run(command: ReplicaCommand): Promise<ReplicaAnswer>;
  stop(): Promise<void>;
}

/** Replicas that share with each other (a key prefix in Redis; a hub and its processes). */
interface Network {
  /**
   * `claimTimeoutMs`: --state-claim-timeout-ms for this replica (2 s if left out);
   * `slowLoadSync`: over Redis, load reports only once a minute (the cluster's channel sends
   * them as they change, whatever this says).
   */
  replica(options?: {
    claimTimeoutMs?: number;
    slowLoadSync?: boolean;
    rankHoldMs?: number;
  }): Promise<Replica>;
  /**
   * The place where claims meet stops answering (Redis paused; the primary holding its claims, as
   * a busy event loop would); the function returned waits until it answers again, late ones first.
   */
  stallClaims(): Promise<() => Promise<void>>;
}

/** How long the Redis medium's stall lasts (CLIENT PAUSE, which no command can lift early). */
const REDIS_STALL_MS = 1000;

interface Medium {
  readonly name: string;
  readonly skip: string | undefined;
  setUp(): Promise<void>;
  network(): Network;
  tearDown(): Promise<void>;
}

const started: Replica[] = [];

function redisMedium(): Medium {
  let redis: TestRedis | undefined;
  return {
    name: "Redis streams (redis-server)",
    skip: redisSkipReason,
    async setUp() {
      redis = await startRedis();
    },
    network() {
      const keyPrefix = `t${randomBytes(4).toString("hex")}`;
      return {
        async replica(options) {
          const node = new ReplicaNode(
            new RedisTransport(
              {
                ...defaultConfig().state,
                url: redis!.url,
                secret: TEST_STATE_SECRET,
                keyPrefix,
                loadIntervalMs: options?.slowLoadSync === true ? 60_000 : 20,
                claimTimeoutMs: options?.claimTimeoutMs ?? 2000,
                claimTtlMs: 10_000,
              },
              createLogger({ level: "silent" }),
            ),
            options?.rankHoldMs ?? 0,
          );
          await node.start();
          let stopped: Promise<void> | undefined;
          const replica = {
            run: (c: ReplicaCommand) => node.run(c),
            stop: () => {
              stopped ??= node.stop();
              return stopped;
            },
          };
          started.push(replica);
          return replica;
        },
        async stallClaims() {
          await redis!.client.call("CLIENT", "PAUSE", String(REDIS_STALL_MS), "ALL");
          // A command of any client waits for the pause's end: this one answers once it is over.
          return async () => {
            await redis!.client.ping();
          };
        },
      };
    },
    async tearDown() {
      await redis?.stop();
    },
  };
}

const REPLICA_MAIN = new URL("../helpers/replica-node-main.ts", import.meta.url).pathname;

/** A forked replica process: its answers by request number. */
function clusterReplica(worker: ClusterWorker): Promise<Replica> {
  let next = 0;
  const waiting = new Map<
    number,
    { resolve: (a: ReplicaAnswer) => void; reject: (e: Error) => void }
  >();
  const exited = new Promise<void>((resolve) => worker.on("exit", () => resolve()));
  return new Promise((resolveStarted, rejectStarted) => {
    const timer = setTimeout(
      () => rejectStarted(new Error("the replica process did not start")),
      60_000,
    );
    worker.on(
      "message",
      (m: { rpc?: number; result?: ReplicaAnswer; error?: string; started?: boolean }) => {
        if (m?.started === true) {
          clearTimeout(timer);
          resolveStarted(replica);
          return;
        }
        if (typeof m?.rpc !== "number") return;
        const w = waiting.get(m.rpc);
        waiting.delete(m.rpc);
        if (m.error !== undefined) w?.reject(new Error(m.error));
        else w?.resolve(m.result ?? null);
      },
    );
    const replica: Replica = {
      run(command) {
        const rpc = next++;
        return new Promise((resolve, reject) => {
          waiting.set(rpc, { resolve, reject });
          worker.send({ rpc, command });
        });
      },
      async stop() {
        if (worker.isConnected()) worker.send({ stop: true });
        const timer = setTimeout(() => worker.process.kill("SIGKILL"), 10_000);
        await exited;
        clearTimeout(timer);
      },
    };
    started.push(replica);
  });
}

/** The primary, able to hold the claims it receives and answer them later. */
class StallingHub extends SiblingHub {
  stalled = false;
  private readonly held: [number, unknown][] = [];

  override receive(id: number, raw: unknown): void {
    if (this.stalled && (raw as { t?: unknown } | null)?.t === "claim") this.held.push([id, raw]);
    else super.receive(id, raw);
  }

  resume(): void {
    this.stalled = false;
    for (const [id, raw] of this.held.splice(0)) super.receive(id, raw);
  }
}

function clusterMedium(): Medium {
  return {
    name: "the cluster's channel (node:cluster IPC)",
    skip: undefined,
    async setUp() {
      cluster.setupPrimary({ exec: REPLICA_MAIN, execArgv: ["--import", "tsx"], silent: true });
    },
    network() {
      const hub = new StallingHub();
      const group = randomBytes(6).toString("hex");
      // As radixgate-cluster seats its processes (src/cluster.ts): 0, 1, ... in the order started.
      let seats = 0;
      return {
        replica(options) {
          const worker = cluster.fork({
            [CLUSTER_GROUP_ENV]: group,
            [CLUSTER_SEAT_ENV]: String(seats++),
            ...(options?.claimTimeoutMs !== undefined
              ? { [CLAIM_TIMEOUT_ENV]: String(options.claimTimeoutMs) }
              : {}),
            ...(options?.rankHoldMs !== undefined
              ? { [RANK_HOLD_ENV]: String(options.rankHoldMs) }
              : {}),
          });
          connectToHub(hub, worker);
          return clusterReplica(worker);
        },
        async stallClaims() {
          hub.stalled = true;
          return async () => hub.resume();
        },
      };
    },
    async tearDown() {},
  };
}

const W1 = "http://127.0.0.1:9101";
const W2 = "http://127.0.0.1:9102";
const TEXT = `You are the assistant of tenant acme. ${"Follow the tenant's policies. ".repeat(8)}`;
/** Tools every tenant's prompt starts with, then the tenant's own prompt. */
const TOOLS = "Tools every tenant shares: search, calendar, mail, tickets. ".repeat(34);
const tenantOf = (name: string) =>
  `${TOOLS}You serve tenant ${name}. ${`Policies of ${name}, to the letter. `.repeat(60)}`;

describe.each([redisMedium(), clusterMedium()])("the replication over $name", (medium) => {
  describe.skipIf(medium.skip !== undefined)(`(skipped: ${medium.skip ?? "no"})`, () => {
    beforeAll(() => medium.setUp(), 60_000);
    afterAll(() => medium.tearDown());
    afterEach(async () => {
      await Promise.allSettled(started.splice(0).map((r) => r.stop()));
    }, 60_000);

    const hasWorkers = async (r: Replica, urls: string[]) =>
      JSON.stringify(await r.run({ op: "workers" })) === JSON.stringify(urls);

    it("a decision taken on one replica reaches the other's index, and so does taking it back", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      await a.run({ op: "add", url: W1 });
      await waitFor(() => hasWorkers(b, [W1]), 10_000, "b has the worker");
      await a.run({ op: "insert", url: W1, text: TEXT });
      await waitFor(
        async () => (await b.run({ op: "match", url: W1, text: TEXT })) === TEXT.length,
        10_000,
        "b holds the decision",
      );
      await a.run({ op: "truncate", url: W1, text: TEXT, keep: 10 });
      await waitFor(
        async () => (await b.run({ op: "match", url: W1, text: TEXT })) === 10,
        10_000,
        "b takes it back",
      );
    }, 120_000);

    it("every add and remove reaches the others; a replica started later gets the set and the recent decisions", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      await a.run({ op: "add", url: W1 });
      await a.run({ op: "add", url: W2 });
      await waitFor(() => hasWorkers(b, [W1, W2]), 10_000, "b has both workers");
      await b.run({ op: "remove", url: W1 });
      await waitFor(() => hasWorkers(a, [W2]), 10_000, "a removes the worker b removed");
      await a.run({ op: "insert", url: W2, text: TEXT });
      await waitFor(
        async () => (await b.run({ op: "match", url: W2, text: TEXT })) === TEXT.length,
        10_000,
        "b holds the decision",
      );
      const c = await net.replica();
      expect(await c.run({ op: "workers" })).toEqual([W2]);
      expect(await c.run({ op: "match", url: W2, text: TEXT })).toBe(TEXT.length);
    }, 120_000);

    it("a decision right behind the add of its worker (a host name, resolved first) is applied, not dropped", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      const url = "http://worker3.test:9103";
      await a.run({ op: "addAndInsert", url, text: TEXT });
      await waitFor(
        async () => (await b.run({ op: "match", url, text: TEXT })) === TEXT.length,
        10_000,
        "b has the worker and its decision",
      );
    }, 120_000);

    it("two replicas claiming a new prefix at once agree on one value, and a later claim follows it", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      const [x, y] = await Promise.all([
        a.run({ op: "claim", key: "p1", value: "a" }),
        b.run({ op: "claim", key: "p1", value: "b" }),
      ]);
      expect(["a", "b"]).toContain(x);
      expect(y).toBe(x);
      expect(await b.run({ op: "claim", key: "p1", value: "later" })).toBe(x);
      expect(await b.run({ op: "claim", key: "p2", value: "b" })).toBe("b");
    }, 120_000);

    it("after a claim timed out none is tried for a while: a stalled transport costs one wait", async () => {
      const net = medium.network();
      const a = await net.replica({ claimTimeoutMs: 200 });
      const b = await net.replica();
      const resume = await net.stallClaims();
      try {
        // Unanswered in time: the request's own choice stands.
        expect(await a.run({ op: "claim", key: "stalled", value: "a" })).toBe(null);
        // Not asked at all (nothing to wait for), so it never reaches the place claims meet...
        expect(await a.run({ op: "claim", key: "next", value: "a" })).toBe(null);
      } finally {
        await resume();
      }
      // ...where the late question was answered when it came: first come, first served.
      expect(await b.run({ op: "claim", key: "stalled", value: "b" })).toBe("a");
      expect(await b.run({ op: "claim", key: "next", value: "b" })).toBe("b");
    }, 120_000);

    it("a decision's queued prefill weighs on the others at once, not at the next load report", async () => {
      const net = medium.network();
      const a = await net.replica({ slowLoadSync: true });
      const b = await net.replica({ slowLoadSync: true });
      await a.run({ op: "add", url: W1 });
      await a.run({ op: "add", url: W2 });
      await waitFor(() => hasWorkers(b, [W1, W2]), 10_000, "b has the workers");
      expect(await b.run({ op: "peerPending", url: W1 })).toBe("0/0");
      await a.run({ op: "decide", url: W1, text: TEXT, uncached: 4000 });
      await a.run({ op: "decide", url: W1, text: `${TEXT} and more`, uncached: 100 });
      await waitFor(
        async () => (await b.run({ op: "peerPending", url: W1 })) === "4100/2",
        10_000,
        "b counts the prefill a's two decisions queued",
      );
      expect(await b.run({ op: "peerPending", url: W2 })).toBe("0/0");
    }, 120_000);

    it("a peer's queued prefill stops weighing at the request's first byte, or when the peer stops", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      await a.run({ op: "add", url: W1 });
      await waitFor(() => hasWorkers(b, [W1]), 10_000, "b has the worker");
      await a.run({ op: "decide", url: W1, text: TEXT, uncached: 4000 });
      await waitFor(
        async () => (await b.run({ op: "peerPending", url: W1 })) === "4000/1",
        10_000,
        "b counts a's queued prefill",
      );
      await a.run({ op: "finish" });
      await waitFor(
        async () => (await b.run({ op: "peerPending", url: W1 })) === "0/0",
        10_000,
        "b counts none once a's request has its first byte",
      );
      await a.run({ op: "decide", url: W1, text: TEXT, uncached: 300 });
      await waitFor(
        async () => (await b.run({ op: "peerPending", url: W1 })) === "300/1",
        10_000,
        "b counts a's next request",
      );
      await a.stop();
      await waitFor(
        async () => (await b.run({ op: "peerPending", url: W1 })) === "0/0",
        10_000,
        "b forgets a's queued prefill once a stops",
      );
    }, 120_000);

    it("a replica following another's claim on a new prefix weighs the prefill the claimer queued there", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      const w1 = await a.run({ op: "add", url: W1 });
      await a.run({ op: "add", url: W2 });
      await waitFor(() => hasWorkers(b, [W1, W2]), 10_000, "b has the workers");
      // a decided its first new tenant onto W1 and claimed it; its op has not reached b yet.
      const acme = tenantOf("acme");
      const key = newPrefixClaimKey(undefined, acme, 2 * CLAIM_BLOCK_CHARS);
      const value = newPrefixClaimValue(String(w1), acme.length, acme);
      expect(await a.run({ op: "claim", key, value })).toBe(value);
      // b's first new tenant shares only the tools: it goes where one router would send it, not
      // after a's onto the worker already computing a's whole prompt.
      const routed = String(await b.run({ op: "route", text: tenantOf("globex") }));
      expect(routed).toBe(`${W2} lowest_cost`);
      expect(await b.run({ op: "claim", key, value: "later" })).toBe(value);
    }, 120_000);

    it("a replica of rank 1 holds a new tenant's placement until its rank-0 peer's decision of the same instant has arrived, and places it as one router would", async () => {
      const net = medium.network();
      const a = await net.replica();
      const b = await net.replica({ rankHoldMs: 500 });
      await a.run({ op: "add", url: W1 });
      await a.run({ op: "add", url: W2 });
      await waitFor(() => hasWorkers(b, [W1, W2]), 10_000, "b has the workers");
      await waitFor(
        async () => `${await a.run({ op: "rank" })},${await b.run({ op: "rank" })}` === "0,1",
        10_000,
        "ranks 0, 1",
      );
      // Every worker holds the tools every tenant shares: a new tenant's cost is the same on each,
      // and the near-tie goes to one worker on every replica (the preamble's rendezvous winner).
      for (const url of [W1, W2]) await a.run({ op: "insert", url, text: TOOLS });
      for (const url of [W1, W2])
        await waitFor(
          async () => (await b.run({ op: "match", url, text: TOOLS })) === TOOLS.length,
          10_000,
          "b knows the tools on both",
        );
      // Two new tenants at the same instant: b's first (rank 1: it holds), then a's (rank 0: at
      // once). Without the hold b decides before a's decision exists, on the same worker.
      const bRouted = b.run({ op: "route", text: tenantOf("globex") });
      const aRouted = String(await a.run({ op: "route", text: tenantOf("acme") }));
      const [aWorker] = aRouted.split(" ");
      const [bWorker] = String(await bRouted).split(" ");
      expect([aWorker, bWorker].sort()).toEqual([W1, W2]);
    }, 120_000);

    it("ranks the replicas in the order they started, alike on each", async () => {
      const net = medium.network();
      const a = await net.replica();
      const b = await net.replica();
      const ranks = async (rs: Replica[]) =>
        (await Promise.all(rs.map((r) => r.run({ op: "rank" })))).join(",");
      await waitFor(async () => (await ranks([a, b])) === "0,1", 10_000, "ranks 0, 1");
      // Over Redis the rank is counted among the live replicas; the cluster's primary gives the
      // seat that freed to the process it starts next instead (src/cluster.ts).
      if (medium.name.startsWith("Redis")) {
        await a.stop();
        await waitFor(async () => (await ranks([b])) === "0", 10_000, "b moves up");
      }
    }, 120_000);

    it("a replica's requests in flight weigh on the others' view of the worker until they end or it stops", async () => {
      const net = medium.network();
      const [a, b] = [await net.replica(), await net.replica()];
      await a.run({ op: "add", url: W1 });
      await waitFor(() => hasWorkers(b, [W1]), 10_000, "b has the worker");
      await a.run({ op: "dispatch", url: W1, n: 3 });
      await waitFor(
        async () => (await b.run({ op: "peerInFlight", url: W1 })) === 3,
        10_000,
        "b counts a's 3 requests",
      );
      await a.run({ op: "finish" });
      await waitFor(
        async () => (await b.run({ op: "peerInFlight", url: W1 })) === 0,
        10_000,
        "b counts none once they end",
      );
      await a.run({ op: "dispatch", url: W1, n: 2 });
      await waitFor(
        async () => (await b.run({ op: "peerInFlight", url: W1 })) === 2,
        10_000,
        "b counts a's 2 requests",
      );
      await a.stop();
      await waitFor(
        async () => (await b.run({ op: "peerInFlight", url: W1 })) === 0,
        10_000,
        "b forgets a's count once a stops",
      );
    }, 120_000);
  });
});
