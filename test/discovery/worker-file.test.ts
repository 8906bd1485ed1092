import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseWorkerFile } from "../../src/discovery/worker-file.js";
import type { RunningRouter } from "../../src/server.js";
import { listWorkers, longStream, servedBy } from "../helpers/discovery.js";
import { captureLogs } from "../helpers/log-capture.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

describe("parseWorkerFile", () => {
  it("reads a JSON or YAML list of URLs or POST /workers objects, or {workers: [...]}", () => {
    expect(parseWorkerFile('["http://10.0.0.1:30000"]', "w.json")).toEqual([
      { url: "http://10.0.0.1:30000" },
    ]);
    const yaml =
      "workers:\n  - url: http://10.0.0.1:30000\n    api_key: k1\n  - http://10.0.0.2:30000\n";
    expect(parseWorkerFile(yaml, "w.yaml")).toEqual([
      { url: "http://10.0.0.1:30000", apiKey: "k1" },
      { url: "http://10.0.0.2:30000" },
    ]);
    expect(parseWorkerFile("", "w.yaml")).toEqual([]);
  });

  it("refuses a file that is not a list of workers, saying where", () => {
    expect(() => parseWorkerFile("[oops", "w.json")).toThrow(/not valid JSON/);
    expect(() => parseWorkerFile("url: x", "w.yaml")).toThrow(/must be a list/);
    expect(() => parseWorkerFile("- url: http://a:1\n  apikey: k", "w.yaml")).toThrow(
      /entry 1: unknown field "apikey"/,
    );
    expect(() => parseWorkerFile('[{"url": "http://a:1", "api_key": 3}]', "w.json")).toThrow(
      /entry 1: api_key must be/,
    );
    expect(() => parseWorkerFile("[1]", "w.json")).toThrow(/entry 1/);
  });
});

describe("--worker-file: workers follow the file's changes", () => {
  let dir: string;
  let file: string;
  let a: SimWorker;
  let b: SimWorker;
  let router: RunningRouter;
  const logs = captureLogs("info");

  /** Replaces the file as tools do: a new file renamed over it. */
  const rewrite = async (text: string) => {
    const tmp = `${file}.tmp`;
    await writeFile(tmp, text);
    await rename(tmp, file);
  };
  const urls = async () => (await listWorkers(router.url)).map((w) => w.url).sort();

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-worker-file-"));
    file = join(dir, "workers.yaml");
    [a, b] = await Promise.all([
      startSimWorker({ id: "a", timeScale: 1, stepFloorMs: 10 }),
      startSimWorker({ id: "b", timeScale: 1, stepFloorMs: 10 }),
    ]);
    await writeFile(file, `- ${a.url}\n`);
    router = await startTestRouter(
      // Health checks on (a long interval): each new worker's first check gates its traffic.
      {
        workerFile: file,
        healthCheckIntervalSecs: 60,
        discoveryGraceSecs: 0,
        // Every worker in turn: "b takes traffic" is then a plain observation.
        policy: "round_robin",
      },
      logs.logger,
    );
  });
  afterAll(async () => {
    await router?.stop(100);
    await Promise.all([a?.close(), b?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it("registers the file's workers at start: they take traffic from the first request", async () => {
    expect(await urls()).toEqual([a.url]);
    expect(await servedBy(router.url)).toBe("a");
  });

  it("a worker added to the file takes traffic after its health check", async () => {
    await rewrite(`- ${a.url}\n- url: ${b.url}\n`);
    await waitFor(async () => (await urls()).length === 2, 10_000, "b registered");
    const seen = new Set<string>();
    await waitFor(
      async () => {
        seen.add(await servedBy(router.url, `prompt ${seen.size} ${Math.random()}`));
        return seen.has("b");
      },
      10_000,
      "b served",
    );
  });

  it("a broken file is logged and ignored: the last good one stands", async () => {
    const before = logs.entries.length;
    await rewrite("- url: [this is not yaml\n");
    await waitFor(
      () =>
        logs.entries
          .slice(before)
          .some((e) => e.msg === "worker file ignored: the last good version stands"),
      10_000,
      "the broken file logged",
    );
    expect(await urls()).toEqual([a.url, b.url].sort());
    await rewrite('{"workers": "not a list"}');
    await waitFor(
      () =>
        logs.entries
          .slice(before)
          .filter((e) => e.msg === "worker file ignored: the last good version stands").length >= 2,
      10_000,
      "the second broken file logged",
    );
    expect(await urls()).toEqual([a.url, b.url].sort());
  });

  it("a worker removed from the file drains: its in-flight request completes, no new one reaches it", async () => {
    // A long stream on a: pin it there by taking b out of the running for a moment.
    const bWorker = router.context.registry.get(b.url);
    if (bWorker === undefined) throw new Error("b not registered");
    bWorker.setDraining(true);
    // Slowed (a step of 0.5 s: the stream lasts a minute) so that it is surely still in flight
    // when a leaves, however slow the machine; sped up again once a is out.
    a.setFaults({ slowdown: 50 });
    let settled = false;
    const inFlight = longStream(router.url, 120).finally(() => {
      settled = true;
    });
    await waitFor(() => router.context.registry.get(a.url)?.inFlight === 1, 5000, "a busy");
    bWorker.setDraining(false);

    await rewrite(`- ${b.url}\n`);
    await waitFor(async () => (await urls()).length === 1, 10_000, "a removed");
    expect(await urls()).toEqual([b.url]);
    for (let i = 0; i < 5; i++) expect(await servedBy(router.url, `after ${i}`)).toBe("b");
    expect(settled).toBe(false);
    a.setFaults({ slowdown: 1 });
    const stream = await inFlight;
    expect(stream).toEqual({ status: 200, worker: "a", done: true });
  });
});

describe("--discovery-grace-secs: a worker that flaps keeps its tree", () => {
  it("back in the file within the grace period: no traffic while out, tree intact on return", async () => {
    const dir = await mkdtemp(join(tmpdir(), "radixgate-worker-file-"));
    const file = join(dir, "workers.json");
    const [a, b] = await Promise.all([
      startSimWorker({ id: "a", timeScale: 0 }),
      startSimWorker({ id: "b", timeScale: 0 }),
    ]);
    await writeFile(file, JSON.stringify([a.url, b.url]));
    const router = await startTestRouter({ workerFile: file, discoveryGraceSecs: 600 });
    try {
      const tree = async () => (await listWorkers(router.url)).find((w) => w.url === a.url);
      for (let i = 0; i < 6; i++)
        await servedBy(router.url, `a prompt long enough to be kept ${i}`);
      const chars = (await tree())?.tree_characters ?? 0;
      await waitFor(async () => ((await tree())?.tree_characters ?? 0) > 0, 5000, "a tree");

      await writeFile(file, JSON.stringify([b.url]));
      await waitFor(async () => (await tree())?.draining === true, 10_000, "a draining");
      for (let i = 0; i < 5; i++) expect(await servedBy(router.url, `while out ${i}`)).toBe("b");

      await writeFile(file, JSON.stringify([a.url, b.url]));
      await waitFor(async () => (await tree())?.draining !== true, 10_000, "a back");
      expect((await tree())?.tree_characters).toBe(chars);
      expect(chars).toBeGreaterThan(0);
    } finally {
      await router.stop(100);
      await Promise.all([a.close(), b.close()]);
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("--worker-file entries get the admin API's checks", () => {
  it("link-local addresses and the router's own address are refused and logged; the rest join", async () => {
    const dir = await mkdtemp(join(tmpdir(), "radixgate-worker-file-"));
    const file = join(dir, "workers.json");
    const sim = await startSimWorker({ id: "ok", timeScale: 0 });
    await writeFile(file, JSON.stringify(["http://169.254.169.254", sim.url]));
    const logs = captureLogs("info");
    const router = await startTestRouter({ workerFile: file }, logs.logger);
    try {
      expect((await listWorkers(router.url)).map((w) => w.url)).toEqual([sim.url]);
      await writeFile(file, JSON.stringify([sim.url, `http://localhost:${router.port}`]));
      const refused = () =>
        logs.entries
          .filter((e) => e.msg === "discovered worker refused")
          .map((e) => String(e.reason));
      await waitFor(() => refused().length === 2, 10_000, "the router's own address refused");
      expect(refused()[0]).toMatch(/link-local/);
      expect(refused()[1]).toMatch(/this router's own address/);
      expect((await listWorkers(router.url)).map((w) => w.url)).toEqual([sim.url]);
    } finally {
      await router.stop(100);
      await sim.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
