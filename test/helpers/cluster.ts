import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { waitFor } from "./router.js";

const ROOT = new URL("../../", import.meta.url).pathname;

/** A radixgate-cluster started by `startCluster`: its primary, the port, and its logs so far. */
export interface Cluster {
  child: ChildProcess;
  port: number;
  log: () => string;
  errors: () => string;
  exited: Promise<number | null>;
}

/**
 * `src/cluster.ts --processes 2` routing to `workerUrls` with health checks and engine polls off,
 * once both processes are listening. `extra`: the cluster's own flags; `routerArgs`: more router
 * flags.
 */
export async function startCluster(
  workerUrls: string[],
  extra: string[] = [],
  routerArgs: string[] = [],
): Promise<Cluster> {
  const child = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "src/cluster.ts",
      "--processes",
      "2",
      ...extra,
      "--",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--worker-urls",
      ...workerUrls,
      "--health-check-interval-secs",
      "0",
      "--engine-poll-interval-secs",
      "0",
      "--shutdown-grace-secs",
      "5",
      ...routerArgs,
    ],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  try {
    await waitFor(
      () => listening(stdout).length >= 2,
      30_000,
      () => `both processes listening\n${stderr}`,
    );
  } catch (err) {
    // The caller never gets the child to stop: stop it here, or it outlives the test run.
    child.kill("SIGTERM");
    const hard = setTimeout(() => child.kill("SIGKILL"), 10_000);
    await exited;
    clearTimeout(hard);
    throw err;
  }
  return { child, port: listening(stdout)[0]!, log: () => stdout, errors: () => stderr, exited };
}

/** The port of each "radixgate listening" line (one per process started). */
export function listening(log: string): number[] {
  return log
    .split("\n")
    .filter((line) => line.includes("radixgate listening"))
    .map((line) => Number(/"port":(\d+)/.exec(line)?.[1]));
}

/** The cluster's router processes (the primary's children), from /proc. */
export function childPids(pid: number): number[] {
  const raw = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
  return raw === "" ? [] : raw.split(/\s+/).map(Number);
}
