/**
 * Fleets of simulated workers for benchmarks and the demo, hosted in this process or in a child
 * process. The child keeps the simulated engines (tokenizing, hashing KV blocks, writing SSE
 * chunks) off the event loop that runs the router and the load client, so on a small machine the
 * client's latency measurements are not inflated by the simulator's own CPU work. A host outlives
 * its fleets: a benchmark starts a fresh (cold-cache) fleet per run in an already warm process.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { SimStats, SimWorker, SimWorkerOptions } from "../../sim/worker.js";
import { startSimWorker } from "../../sim/worker.js";
import { TSX_EXEC_ARGV } from "./tsx-exec-argv.js";

export interface FleetOptions {
  count: number;
  /** Options of every worker (ids are set to `<idPrefix><i>`, ports to 0 unless basePort). */
  worker?: SimWorkerOptions;
  /** Worker ids: `${idPrefix}1` ... (default "w"). */
  idPrefix?: string;
  /** First port; workers take consecutive ports (default 0: any free port). */
  basePort?: number;
}

export interface FleetMember {
  id: string;
  url: string;
  /** The worker's KV-event endpoints, when started with `kvEvents`. */
  kvEvents?: { endpoint: string; replayEndpoint: string | undefined };
  /** A prefill worker's bootstrap port (SGLang's disaggregation), when it has one. */
  bootstrapPort?: number;
}

/** A started worker as the fleet reports it. */
export function memberOf(s: SimWorker): FleetMember {
  const kv = s.kvEvents;
  const bootstrap = s.bootstrapPort === undefined ? {} : { bootstrapPort: s.bootstrapPort };
  return kv === undefined
    ? { id: s.id, url: s.url, ...bootstrap }
    : {
        id: s.id,
        url: s.url,
        kvEvents: { endpoint: kv.endpoint, replayEndpoint: kv.replayEndpoint },
        ...bootstrap,
      };
}

export interface Fleet {
  readonly workers: readonly FleetMember[];
  /** Every worker's counters, in `workers` order. */
  stats(): Promise<SimStats[]>;
  /** The workers themselves, in `workers` order, when hosted in this process (diagnostics). */
  readonly sims?: readonly SimWorker[];
  close(): Promise<void>;
}

export interface FleetHost {
  startFleet(o: FleetOptions): Promise<Fleet>;
  /** The process the workers run in, when it is a child (its CPU time, for the benches). */
  readonly pid?: number;
  /** Closes every fleet still open and, for a child host, ends the child process. */
  close(): Promise<void>;
}

/** Message protocol between fleet.ts and fleet-child.ts. */
export type FleetRequest =
  | { type: "start"; seq: number; workers: SimWorkerOptions[] }
  | { type: "close"; seq: number; urls: string[] }
  | { type: "exit" };
export type FleetReply =
  | { type: "started"; seq: number; workers: FleetMember[] }
  | { type: "closed"; seq: number }
  | { type: "error"; seq: number; message: string };

/** One options object per worker: ids w1..wN, consecutive ports when basePort is set. */
export function fleetWorkerOptions(o: FleetOptions): SimWorkerOptions[] {
  if (!Number.isInteger(o.count) || o.count < 1) {
    throw new RangeError(`count must be a positive integer, got ${o.count}`);
  }
  const prefix = o.idPrefix ?? "w";
  return Array.from({ length: o.count }, (_, i) => ({
    ...o.worker,
    id: `${prefix}${i + 1}`,
    port: o.basePort === undefined || o.basePort === 0 ? 0 : o.basePort + i,
  }));
}

/**
 * A simulated engine that streams one chunk every `intervalMs` after `firstTokenMs`, whatever the
 * batch (no prefill or decode time of its own): the relay benchmarks' engine.
 */
export function pacedEngine(
  intervalMs: number,
  firstTokenMs: number,
  model: string,
  maxRunning?: number,
): Omit<SimWorkerOptions, "id" | "port"> {
  return {
    timeScale: 1,
    stepFloorMs: intervalMs,
    decodePerSeqMs: 0,
    kvReadMsPer1kTokens: 0,
    prefillTokensPerSec: 1e9,
    firstTokenDelayMs: firstTokenMs,
    ...(maxRunning === undefined ? {} : { maxRunning }),
    maxBatchTokens: 1_000_000,
    kvCapacityTokens: 4_000_000,
    model,
  };
}

/** Start simulated workers in this process. */
export async function startSimWorkers(options: readonly SimWorkerOptions[]): Promise<SimWorker[]> {
  const sims: SimWorker[] = [];
  try {
    for (const opts of options) sims.push(await startSimWorker(opts));
  } catch (err) {
    await Promise.allSettled(sims.map((s) => s.close()));
    throw err;
  }
  return sims;
}

export function inlineFleetHost(): FleetHost {
  const open = new Set<Fleet>();
  return {
    async startFleet(o) {
      const sims = await startSimWorkers(fleetWorkerOptions(o));
      const fleet: Fleet = {
        workers: sims.map(memberOf),
        stats: async () => sims.map((s) => s.stats()),
        sims,
        close: async () => {
          open.delete(fleet);
          await Promise.all(sims.map((s) => s.close()));
        },
      };
      open.add(fleet);
      return fleet;
    },
    async close() {
      await Promise.all([...open].map((f) => f.close()));
    },
  };
}

const CHILD_SCRIPT = fileURLToPath(new URL("./fleet-child.ts", import.meta.url));

/** A host in a child process (Node with tsx, so it works under tsx and under vitest alike). */
export async function childFleetHost(): Promise<FleetHost> {
  const child = fork(CHILD_SCRIPT, [], {
    execArgv: [...TSX_EXEC_ARGV],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const pending = new Map<
    number,
    { resolve: (r: FleetReply) => void; reject: (e: Error) => void }
  >();
  let seq = 0;
  let exited = false;
  child.on("message", (msg: FleetReply) => {
    const p = pending.get(msg.seq);
    if (p === undefined) return;
    pending.delete(msg.seq);
    if (msg.type === "error") p.reject(new Error(msg.message));
    else p.resolve(msg);
  });
  child.once("exit", (code) => {
    exited = true;
    for (const p of pending.values()) {
      p.reject(new Error(`simulated fleet process exited (code ${code})`));
    }
    pending.clear();
  });
  const call = (msg: FleetRequest & { seq: number }): Promise<FleetReply> =>
    new Promise((resolve, reject) => {
      if (exited) return reject(new Error("simulated fleet process is gone"));
      pending.set(msg.seq, { resolve, reject });
      child.send(msg);
    });
  await new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", reject);
  });
  const open = new Set<Fleet>();
  return {
    ...(child.pid === undefined ? {} : { pid: child.pid }),
    async startFleet(o) {
      const reply = await call({ type: "start", seq: ++seq, workers: fleetWorkerOptions(o) });
      if (reply.type !== "started") throw new Error(`unexpected reply ${reply.type}`);
      const workers = reply.workers;
      let closing: Promise<void> | undefined;
      const fleet: Fleet = {
        workers,
        stats: () => Promise.all(workers.map((w) => fetchStats(w.url))),
        close: () => {
          closing ??= (async () => {
            open.delete(fleet);
            if (!exited) await call({ type: "close", seq: ++seq, urls: workers.map((w) => w.url) });
          })();
          return closing;
        },
      };
      open.add(fleet);
      return fleet;
    },
    async close() {
      await Promise.allSettled([...open].map((f) => f.close()));
      await stopChild(child);
    },
  };
}

async function fetchStats(url: string): Promise<SimStats> {
  const res = await fetch(`${url}/_sim/stats`);
  if (!res.ok) throw new Error(`${url}/_sim/stats answered ${res.status}`);
  return (await res.json()) as SimStats;
}

function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    // Ask nicely; a child that does not exit within 5 s is killed.
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    if (child.connected) child.send({ type: "exit" } satisfies FleetRequest);
    else child.kill();
  });
}
