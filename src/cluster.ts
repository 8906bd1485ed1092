#!/usr/bin/env node
/**
 * One router process per core on one machine, sharing one port (node:cluster: the primary accepts
 * connections and hands them to the processes in turn). The processes share their routing
 * decisions, in-flight counts and new-prefix claims over node:cluster's IPC, the primary relaying
 * and answering claims (state/cluster-hub.ts), so every process's index sees every decision, as
 * one process's would. With --state-url they also share with the replicas on other hosts through
 * Redis (and leave each other out of what they read there). `--no-share`: each process keeps its
 * own index, as before (benchmarks compare the two).
 *
 *   radixgate-cluster --processes 2 -- --worker-urls ...
 *   RADIXGATE_STATE_SECRET=... radixgate-cluster --processes 2 -- --state-url redis://127.0.0.1:6379/0 --worker-urls ...
 *   npm run cluster -- --processes 2 -- <radixgate flags>
 *
 * --processes defaults to the number of cores. A process that crashes is started again (at most
 * once a second); one that exits with a usage error (2), or exits 0 before it ever listened
 * (--help, --version), stops the whole cluster with that code.
 * SIGTERM is passed on, SIGINT too (as an IPC request, see below); the primary exits once every
 * process has stopped gracefully.
 */
import cluster, { type Worker } from "node:cluster";
import { randomBytes } from "node:crypto";
import { realpathSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { CLUSTER_STOP_MESSAGE } from "./parent-watch.js";
import {
  CLUSTER_GROUP_ENV,
  CLUSTER_SEAT_ENV,
  connectToHub,
  freeSeat,
} from "./state/cluster-channel.js";
import { SiblingHub } from "./state/cluster-hub.js";

const USAGE = "usage: radixgate-cluster [--processes <n>] [--no-share] [--] <radixgate flags>";
const HELP = `${USAGE}

Runs one radixgate process per core on one port; the processes share routing decisions,
in-flight counts, new-prefix claims and workers over the local channel.

  --processes <n>  router processes (default: the number of cores)
  --no-share       each process keeps its own index and workers
  -h, --help       this text; \`radixgate --help\` lists the router flags
`;

export function parseClusterArgs(argv: readonly string[]): {
  processes: number;
  /** Share decisions over the local channel (default); --no-share: each process on its own. */
  share: boolean;
  routerArgs: string[];
  /** --help or -h among the cluster's own flags. */
  help?: true;
} {
  let processes = os.availableParallelism();
  let share = true;
  let help = false;
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") {
      i += 1;
      break;
    }
    if (arg === "--help" || arg === "-h") {
      help = true;
      continue;
    }
    if (arg === "--no-share") {
      share = false;
      continue;
    }
    const inline = arg.startsWith("--processes=") ? arg.slice("--processes=".length) : undefined;
    if (arg !== "--processes" && inline === undefined) break;
    const raw = inline ?? argv[++i];
    const n = Number(raw);
    if (raw === undefined || !Number.isInteger(n) || n < 1 || n > 256) {
      throw new Error(`--processes must be an integer in [1, 256], got "${raw ?? ""}"`);
    }
    processes = n;
  }
  return {
    processes,
    share,
    routerArgs: argv.slice(i) as string[],
    ...(help ? { help: true as const } : {}),
  };
}

/** Router flags after which a process prints something and exits at once. */
const ONE_SHOT_FLAGS = new Set(["--help", "-h", "--version", "-V"]);

function main(): void {
  let parsed: ReturnType<typeof parseClusterArgs>;
  try {
    parsed = parseClusterArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`radixgate-cluster: error: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  if (parsed.help === true) {
    process.stdout.write(HELP);
    process.exit(0);
  }
  const { share, routerArgs } = parsed;
  // A router asked for its help or version prints it and exits: one process is enough.
  const processes = routerArgs.some((a) => ONE_SHOT_FLAGS.has(a)) ? 1 : parsed.processes;
  const redis = routerArgs.some((a) => a === "--state-url" || a.startsWith("--state-url="));
  if (processes > 1 && !share && !redis && process.env.RADIXGATE_STATE_URL === undefined) {
    process.stderr.write(
      "radixgate-cluster: warning: --no-share and no --state-url: each process learns only its own share of the traffic (see docs/replication.md)\n",
    );
  }
  const cli = fileURLToPath(
    new URL(import.meta.url.endsWith(".ts") ? "./cli.ts" : "./cli.js", import.meta.url),
  );
  cluster.setupPrimary({ exec: cli, args: routerArgs });

  let stopping = false;
  let lastRestart = 0;
  // The local channel: the primary relays decisions and counts, and answers new-prefix claims.
  const hub = share ? new SiblingHub() : undefined;
  const group = randomBytes(6).toString("hex");
  // Each process's seat (worker id → seat): one started again takes the seat that freed.
  const seats = new Map<number, number>();
  const fork = (): Worker => {
    const seat = freeSeat(seats.values());
    const worker = cluster.fork({
      ...(share ? { [CLUSTER_GROUP_ENV]: group } : {}),
      [CLUSTER_SEAT_ENV]: String(seat),
    });
    seats.set(worker.id, seat);
    if (hub !== undefined)
      connectToHub(hub, worker, () =>
        process.stderr.write(
          `radixgate-cluster: process ${worker.process.pid} is not reading its channel; its siblings' decisions are dropped until it catches up\n`,
        ),
      );
    return worker;
  };
  for (let i = 0; i < processes; i++) fork();
  // One line once every process listens (before that, connections go to the ones that do).
  const listening = new Set<number>();
  cluster.on("listening", (worker) => {
    const before = listening.size;
    listening.add(worker.id);
    if (before < processes && listening.size === processes) {
      process.stderr.write(`radixgate-cluster: all ${processes} processes listening\n`);
    }
  });

  /** Processes that listened at least once (a process that never did and exits 0 is done). */
  const everListened = new Set<number>();
  cluster.on("listening", (worker) => everListened.add(worker.id));

  cluster.on("exit", (worker, code, signal) => {
    listening.delete(worker.id);
    seats.delete(worker.id);
    const listened = everListened.delete(worker.id);
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit();
      return;
    }
    // Exit 2: a usage error; exit 0 before listening: it printed its help or version and is done.
    // Starting another would only do the same again.
    if (code === 2 || (code === 0 && !listened)) {
      stopping = true;
      for (const w of Object.values(cluster.workers ?? {})) w?.kill("SIGTERM");
      process.exitCode = code;
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit();
      return;
    }
    process.stderr.write(
      `radixgate-cluster: process ${worker.process.pid} exited (${signal ?? code}); starting another\n`,
    );
    const wait = Math.max(0, lastRestart + 1000 - Date.now());
    lastRestart = Date.now() + wait;
    setTimeout(fork, wait);
  });

  // SIGTERM (docker, kubernetes: sent to the primary only) is passed on. SIGINT may be Ctrl-C in
  // a terminal, which reaches every process of the group by itself, or a `kill -INT` (or npm
  // passing one on) that reaches the primary only: the processes are asked to stop over IPC, which
  // they do not count as a second signal (that one means "exit now").
  process.on("SIGTERM", () => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill("SIGTERM");
  });
  process.on("SIGINT", () => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) {
      if (w?.isConnected()) w.send(CLUSTER_STOP_MESSAGE);
    }
  });
}

/** Started as a program (npm's bin link included), not imported by a test. */
function isEntryPoint(): boolean {
  const argv1 = process.argv[1];
  if (argv1 === undefined) return false;
  try {
    return realpathSync(argv1) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (cluster.isPrimary && isEntryPoint()) main();
