import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { describe, expect, it } from "vitest";
import { flagName, planFromArgs } from "../../sim/cli.js";
import { NUMERIC_OPTIONS } from "../../sim/options.js";

describe("sim CLI: arguments", () => {
  it("maps every numeric option to a kebab-case flag", () => {
    expect(flagName("timeScale")).toBe("--time-scale");
    expect(flagName("kvReadMsPer1kTokens")).toBe("--kv-read-ms-per-1k-tokens");
    for (const spec of NUMERIC_OPTIONS) {
      const plan = planFromArgs([flagName(spec.key), "7"]);
      expect(plan.workers[0]?.[spec.key]).toBe(7);
    }
  });

  it("passes worker identity, flavor and faults through", () => {
    const plan = planFromArgs([
      "--port",
      "31001",
      "--id",
      "w1",
      "--flavor",
      "vllm",
      "--model",
      "m",
      "--time-scale",
      "0.01",
      "--fail-first",
      "2",
      "--fail-status",
      "503",
      "--hang",
      "--crash-mid-stream",
      "3",
      "--slowdown",
      "2",
      "--unhealthy",
    ]);
    expect(plan.count).toBe(1);
    expect(plan.workers[0]).toMatchObject({
      port: 31001,
      id: "w1",
      flavor: "vllm",
      model: "m",
      timeScale: 0.01,
      faults: {
        failFirst: 2,
        failStatus: 503,
        hang: true,
        crashMidStream: 3,
        slowdown: 2,
        unhealthy: true,
      },
    });
  });

  it("priority scheduling flags, spelled as SGLang's", () => {
    expect(planFromArgs([]).workers[0]).not.toHaveProperty("priorityScheduling");
    const plan = planFromArgs([
      "--enable-priority-scheduling",
      "--priority-scheduling-preemption-threshold",
      "0",
      "--disable-priority-preemption",
    ]);
    expect(plan.workers[0]).toMatchObject({
      priorityScheduling: true,
      prioritySchedulingPreemptionThreshold: 0,
      disablePriorityPreemption: true,
    });
  });

  it("--count N gives consecutive ports (or all random) and numbered ids", () => {
    const plan = planFromArgs(["--count", "3", "--port", "31001", "--id", "w"]);
    expect(plan.workers.map((w) => [w.port, w.id])).toEqual([
      [31001, "w1"],
      [31002, "w2"],
      [31003, "w3"],
    ]);
    expect(planFromArgs(["--count", "2"]).workers.map((w) => [w.port, w.id])).toEqual([
      [0, "w1"],
      [0, "w2"],
    ]);
  });

  it("rejects bad values", () => {
    const quiet = { writeErr: () => {} };
    expect(() => planFromArgs(["--max-running", "1.5"], quiet)).toThrow(/integer/);
    expect(() => planFromArgs(["--time-scale", "-1"], quiet)).toThrow(/>= 0/);
    expect(() => planFromArgs(["--flavor", "tgi"], quiet)).toThrow(/flavor/);
    expect(() => planFromArgs(["--port", "65535", "--count", "2"], quiet)).toThrow(RangeError);
  });
});

describe("sim CLI: process", () => {
  it("starts N workers, prints where each listens, and exits cleanly on SIGTERM", async () => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", "sim/cli.ts", "--count", "2", "--port", "0", "--time-scale", "0"],
      {
        cwd: new URL("../..", import.meta.url).pathname,
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const exited = new Promise<number | null>((resolve) =>
      child.on("exit", (code) => resolve(code)),
    );
    try {
      const lines = createInterface({ input: child.stdout });
      const urls: string[] = [];
      for await (const line of lines) {
        const url = /listening on (http:\/\/\S+)/.exec(line)?.[1];
        if (url !== undefined) urls.push(url);
        if (urls.length === 2) break;
      }
      expect(urls).toHaveLength(2);
      const ids = await Promise.all(
        urls.map(async (url) => {
          const res = await fetch(`${url}/health`);
          expect(res.status).toBe(200);
          return res.headers.get("x-sim-worker-id");
        }),
      );
      expect(ids).toEqual(["w1", "w2"]);
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
