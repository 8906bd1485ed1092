#!/usr/bin/env node
/**
 * One router process per core on one machine, sharing one port (node:cluster: the primary accepts
 * connections and hands them to the processes in turn). Each process is a replica like a router
 * on another machine: with --state-url they share decisions, load and workers through Redis, the
 * same mechanism as separate machines; without it each learns only its own share of the traffic.
 *
 *   RADIXGATE_STATE_SECRET=... radixgate-cluster --processes 2 -- --state-url redis://127.0.0.1:6379/0 --worker-urls ...
 *   npm run cluster -- --processes 2 -- <radixgate flags>
 *
 * --processes defaults to the number of cores. A process that crashes is started again (at most
 * once a second); one that exits with a usage error (2) stops the whole cluster with that code.
 * SIGTERM is passed on, SIGINT too (as an IPC request, see below); the primary exits once every
 * process has stopped gracefully.
 */
import cluster, { type Worker } from "node:cluster";
import { realpathSync } from "node:fs";
import os from "node:os";
import { fileURLToPath } from "node:url";
import { CLUSTER_STOP_MESSAGE } from "./parent-watch.js";

const USAGE = "usage: radixgate-cluster [--processes <n>] [--] <radixgate flags>";

export function parseClusterArgs(argv: readonly string[]): {
  processes: number;
  routerArgs: string[];
} {
  let processes = os.availableParallelism();
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "--") {
      i += 1;
      break;
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
  return { processes, routerArgs: argv.slice(i) as string[] };
}

function main(): void {
  let parsed: ReturnType<typeof parseClusterArgs>;
  try {
    parsed = parseClusterArgs(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`radixgate-cluster: error: ${(err as Error).message}\n${USAGE}\n`);
    process.exit(2);
  }
  const { processes, routerArgs } = parsed;
  const shared = routerArgs.some((a) => a === "--state-url" || a.startsWith("--state-url="));
  if (processes > 1 && !shared && process.env.RADIXGATE_STATE_URL === undefined) {
    process.stderr.write(
      "radixgate-cluster: warning: no --state-url: each process learns only its own share of the traffic (see docs/architecture.md)\n",
    );
  }
  const cli = fileURLToPath(
    new URL(import.meta.url.endsWith(".ts") ? "./cli.ts" : "./cli.js", import.meta.url),
  );
  cluster.setupPrimary({ exec: cli, args: routerArgs });

  let stopping = false;
  let lastRestart = 0;
  const fork = (): Worker => cluster.fork();
  for (let i = 0; i < processes; i++) fork();

  cluster.on("exit", (worker, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) process.exit();
      return;
    }
    if (code === 2) {
      stopping = true;
      for (const w of Object.values(cluster.workers ?? {})) w?.kill("SIGTERM");
      process.exitCode = 2;
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
