import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../src/server.js";
import { type SimWorker, startSimWorker } from "../src/sim/worker.js";
import { postJson, startTestRouter } from "./helpers/router.js";

const DIR = new URL("../docs/grafana/", import.meta.url);

/** Every radixgate_* series a dashboard's queries read, histogram suffixes folded to the family. */
function queriedMetrics(dashboard: unknown): Set<string> {
  const names = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(visit);
    else if (node && typeof node === "object") {
      for (const [key, value] of Object.entries(node)) {
        if (key === "expr" && typeof value === "string") {
          for (const m of value.matchAll(/\bradixgate_[a-z0-9_]+/g)) names.add(m[0]);
        } else visit(value);
      }
    }
  };
  visit(dashboard);
  return names;
}

describe("Grafana dashboards in docs/grafana", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  let exposition: string;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "grafana", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url] });
    // One request, so per-worker and engine-reported series have samples.
    await (
      await postJson(`${router.url}/v1/chat/completions`, {
        messages: [{ role: "user", content: "dashboard" }],
        max_tokens: 2,
      })
    ).arrayBuffer();
    exposition = await (await fetch(`${router.url}/metrics`)).text();
  });
  afterAll(async () => {
    await router.stop(100);
    await sim.close();
  });

  it("every metric a dashboard queries exists on a running router's /metrics", async () => {
    const files = (await readdir(DIR)).filter((f) => f.endsWith(".json"));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const dashboard = JSON.parse(await readFile(new URL(file, DIR), "utf8"));
      const names = queriedMetrics(dashboard);
      expect(names.size, file).toBeGreaterThan(10);
      for (const name of names) {
        // A sample, or the family's TYPE line (a labelled counter has no sample until counted).
        const family = name.replace(/_(bucket|sum|count)$/, "");
        const present = exposition
          .split("\n")
          .some(
            (line) =>
              line.startsWith(`${name} `) ||
              line.startsWith(`${name}{`) ||
              line.startsWith(`# TYPE ${name} `) ||
              line === `# TYPE ${family} histogram`,
          );
        expect(present, `${file}: ${name}`).toBe(true);
      }
    }
  });

  it("shows the engines' reported hit rate beside the router's own estimate", async () => {
    const dashboard = JSON.parse(await readFile(new URL("radixgate.json", DIR), "utf8"));
    const names = queriedMetrics(dashboard);
    for (const name of [
      "radixgate_engine_cached_tokens_total",
      "radixgate_engine_prompt_tokens_total",
      "radixgate_match_rate_sum",
      "radixgate_worker_info",
    ])
      expect(names.has(name), name).toBe(true);
  });
});
