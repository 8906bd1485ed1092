import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseClusterArgs } from "../../src/cluster.js";
import {
  redisSkipReason,
  startRedis,
  TEST_STATE_SECRET,
  type TestRedis,
} from "../helpers/redis.js";
import { postJson, waitFor } from "../helpers/router.js";

const ROOT = new URL("../../", import.meta.url).pathname;

describe("radixgate-cluster arguments", () => {
  it("takes --processes, then passes everything after -- to the routers", () => {
    expect(parseClusterArgs(["--processes", "3", "--", "--port", "0"])).toEqual({
      processes: 3,
      share: true,
      routerArgs: ["--port", "0"],
    });
    expect(parseClusterArgs(["--processes=2", "--no-share", "--port", "0"])).toEqual({
      processes: 2,
      share: false,
      routerArgs: ["--port", "0"],
    });
    expect(parseClusterArgs(["--port", "1"]).routerArgs).toEqual(["--port", "1"]);
  });

  /** Runs radixgate-cluster to its end (bounded), with its output. */
  const runCluster = (args: string[]) =>
    new Promise<{ code: number | null; out: string; err: string }>((resolve, reject) => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/cluster.ts", ...args], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.on("data", (d) => (out += d));
      child.stderr.on("data", (d) => (err += d));
      const timer = setTimeout(() => {
        child.kill("SIGKILL");
        reject(new Error(`radixgate-cluster ${args.join(" ")} did not exit\n${out}\n${err}`));
      }, 30_000);
      child.on("exit", (code) => {
        clearTimeout(timer);
        resolve({ code, out, err });
      });
    });

  it("--help prints the cluster's usage and exits 0, starting no process", async () => {
    const { code, out } = await runCluster(["--help"]);
    expect(code).toBe(0);
    expect(out).toMatch(/^usage: radixgate-cluster/);
    expect(out).not.toMatch(/radixgate listening/);
  }, 60_000);

  it("a router's --help is printed once and the cluster exits 0 (no process started again)", async () => {
    const help = await runCluster(["--processes", "3", "--", "--help"]);
    expect(help.code).toBe(0);
    expect(help.out.match(/^Usage: /gm)).toHaveLength(1);
    expect(help.out).toMatch(/--worker-urls/);
    expect(help.err).not.toMatch(/starting another/);
  }, 60_000);

  it("a router's --version is printed once and the cluster exits 0", async () => {
    const version = await runCluster(["--processes", "2", "--", "--version"]);
    expect(version.code).toBe(0);
    expect(version.out.trim().split("\n")).toHaveLength(1);
  }, 60_000);

  it("refuses a bad --processes with a clear message", () => {
    expect(() => parseClusterArgs(["--processes", "0"])).toThrow(/--processes must be an integer/);
    expect(() => parseClusterArgs(["--processes"])).toThrow(/--processes/);
  });
});

// One process per core on one port (node:cluster), sharing state through Redis like replicas on
// separate machines: a worker added through whichever process took the connection is on all.
describe.skipIf(redisSkipReason !== undefined)(
  `radixgate-cluster${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    let redis: TestRedis;
    let sims: SimWorker[];

    beforeAll(async () => {
      redis = await startRedis();
      sims = await Promise.all([1, 2].map((i) => startSimWorker({ id: `c${i}`, timeScale: 0 })));
    });

    afterAll(async () => {
      await Promise.allSettled(sims.map((s) => s.close()));
      await redis?.stop();
    });

    it("two processes on one port: a worker added through one is listed by both", async () => {
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "src/cluster.ts",
          "--processes",
          "2",
          "--",
          "--host",
          "127.0.0.1",
          "--port",
          "0",
          "--worker-urls",
          sims[0]!.url,
          "--state-url",
          redis.url,
          "--state-secret",
          TEST_STATE_SECRET,
          "--state-key-prefix",
          "cluster-test",
          "--health-check-interval-secs",
          "0",
        ],
        { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
      );
      let stdout = "";
      child.stdout!.on("data", (d) => (stdout += d));
      child.stderr!.on("data", () => {});
      const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
      try {
        // The log is JSON lines; each process logs one "radixgate listening" with its port.
        const ports = () =>
          stdout
            .split("\n")
            .filter((line) => line.includes("radixgate listening"))
            .flatMap((line) => {
              const port = /"port":(\d+)/.exec(line)?.[1];
              return port === undefined ? [] : [Number(port)];
            });
        await waitFor(() => ports().length >= 2, 30_000, "both processes listening");
        const port = ports()[0]!;
        expect(new Set(ports()).size).toBe(1); // one shared port
        const url = `http://127.0.0.1:${port}`;
        const added = await postJson(`${url}/workers`, { url: sims[1]!.url });
        expect(added.status).toBe(202);
        // Fresh connections land on either process (round robin): each must list both workers.
        await waitFor(
          async () => {
            for (let i = 0; i < 6; i++) {
              const res = await fetch(`${url}/list_workers`, { headers: { connection: "close" } });
              const { urls } = (await res.json()) as { urls: string[] };
              if (urls.length !== 2) return false;
            }
            return true;
          },
          15_000,
          "every process lists the added worker",
        );
      } finally {
        child.kill("SIGTERM");
        await exited;
      }
    }, 60_000);
  },
);
