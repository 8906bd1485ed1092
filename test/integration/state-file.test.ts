import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postChat, startTestRouter, waitFor } from "../helpers/router.js";

// --state-file: a single router (no Redis) restarted keeps its prefix index.
describe("--state-file", () => {
  let workers: SimWorker[] = [];
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-state-file-"));
    workers = await Promise.all(
      ["w1", "w2", "w3"].map((id) => startSimWorker({ id, timeScale: 0 })),
    );
  });
  afterAll(async () => {
    await Promise.allSettled(workers.map((w) => w.close()));
    await rm(dir, { recursive: true, force: true });
  });
  const system = (topic: string) =>
    `You are the ${topic} assistant. ${"Answer carefully and cite the manual. ".repeat(30)}`;
  const router = (path: string, logger?: Parameters<typeof startTestRouter>[1]) =>
    startTestRouter(
      { policy: "cache_aware", workerUrls: workers.map((w) => w.url), stateFile: path },
      logger,
    );

  /** A router on `path` routes a few topics, then stops (saving the file): topic → worker. */
  const routedThenStopped = async (path: string) => {
    const first = await router(path);
    const chosen = new Map<string, string>();
    for (const topic of ["billing", "shipping", "returns", "legal", "hr", "sales"]) {
      const res = await postChat(first, system(topic), "first question");
      chosen.set(topic, res.headers.get("x-radixgate-worker")!);
      await res.text();
    }
    await first.stop(100);
    return chosen;
  };
  const expectCacheHits = async (r: RunningRouter, chosen: Map<string, string>) => {
    for (const [topic, worker] of chosen) {
      const res = await postChat(r, system(topic), "a later question");
      expect(res.headers.get("x-radixgate-worker")).toBe(worker);
      expect(res.headers.get("x-radixgate-route")).toMatch(/^cache_hit/);
      await res.text();
    }
  };

  it("a restarted router routes each prefix to the worker it held before the restart", async () => {
    const path = join(dir, "index.snapshot");
    const chosen = await routedThenStopped(path);
    const logs = captureLogs();
    const second = await router(path, logs.logger);
    try {
      expect(logs.entries.some((l) => l.msg === "state file: prefix index loaded")).toBe(true);
      await expectCacheHits(second, chosen);
    } finally {
      await second.stop(100);
    }
  });

  it("keeps the file's entries for workers discovered after the start, and applies them then", async () => {
    const path = join(dir, "later.snapshot");
    const chosen = await routedThenStopped(path);
    // Restarted before discovery lists every worker (pods answer readiness in any order).
    const logs = captureLogs();
    const second = await startTestRouter(
      { policy: "cache_aware", workerUrls: [workers[0]!.url], stateFile: path },
      logs.logger,
    );
    try {
      const loaded = logs.entries.find((l) => l.msg === "state file: prefix index loaded");
      expect(loaded?.held_for_later).toBeGreaterThan(0);
      for (const w of workers.slice(1))
        await second.context.membership.add({ url: w.url }, "discovery");
      await waitFor(
        async () => [...chosen.values()].every((id) => second.context.index.size(id) > 0),
        5000,
        "the held entries applied",
      );
      await expectCacheHits(second, chosen);
    } finally {
      await second.stop(100);
    }
  });

  it("refuses a corrupt, foreign or missing file with a log line and starts cold", async () => {
    const path = join(dir, "other.snapshot");
    const first = await router(path);
    const res = await postChat(first, system("billing"), "q");
    await res.text();
    await first.stop(100);
    const good = await readFile(path);
    const cases: [string, Buffer | undefined, RegExp][] = [
      ["missing", undefined, /none yet/],
      [
        "corrupt",
        Buffer.concat([good.subarray(0, good.length - 3), Buffer.from("zzz")]),
        /corrupt/,
      ],
      ["foreign", Buffer.from("not a snapshot at all\n"), /not a radixgate/],
    ];
    for (const [, content, message] of cases) {
      const target = join(dir, "case.snapshot");
      await rm(target, { force: true });
      if (content !== undefined) await writeFile(target, content);
      const logs = captureLogs();
      const cold = await router(target, logs.logger);
      try {
        const line = logs.entries.find((l) => String(l.msg).startsWith("state file"));
        expect(String(line?.msg) + String(line?.reason ?? "")).toMatch(message);
        for (const w of cold.context.registry.list()) expect(cold.context.index.size(w.id)).toBe(0);
      } finally {
        await cold.stop(100);
      }
    }
  });
});
