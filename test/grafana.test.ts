import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../sim/worker.js";
import type { RunningRouter } from "../src/server.js";
import { postJson, startTestRouter, waitFor } from "./helpers/router.js";

const DIR = new URL("../docs/grafana/", import.meta.url);
/** Names kept one release as aliases of their _ratio successors (issue 19). */
const RENAMED: Record<string, string> = {
  radixgate_match_rate: "radixgate_match_ratio",
  radixgate_worker_kv_usage: "radixgate_worker_kv_usage_ratio",
};
const DEPRECATED = Object.keys(RENAMED);

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
    // One engine read (at add time), so the engine-reported gauges have samples too.
    router = await startTestRouter({ workerUrls: [sim.url], enginePollIntervalSecs: 3600 });
    const worker = router.context.registry.list()[0]!;
    await waitFor(() => worker.signals.load() !== undefined, 5000, "the engine read");
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

  it("issue 19: reads the _ratio names, not the deprecated aliases", async () => {
    for (const file of (await readdir(DIR)).filter((f) => f.endsWith(".json"))) {
      const names = queriedMetrics(JSON.parse(await readFile(new URL(file, DIR), "utf8")));
      for (const name of names)
        expect(
          DEPRECATED.some((d) => name.startsWith(d)),
          name,
        ).toBe(false);
    }
  });

  it("issue 19: ratios are named _ratio, and the old names stay one release as deprecated aliases", () => {
    for (const name of ["radixgate_match_ratio", "radixgate_worker_kv_usage_ratio"]) {
      expect(exposition).toMatch(new RegExp(`^# HELP ${name} .*ratio 0\\.\\.1`, "m"));
    }
    for (const [old, name] of Object.entries(RENAMED)) {
      expect(exposition).toMatch(new RegExp(`^# HELP ${old} Deprecated alias of ${name} `, "m"));
    }
    // Same values under both names.
    const sample = (name: string) =>
      new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`, "m").exec(exposition)?.[2];
    expect(sample("radixgate_match_rate_count")).toBe(sample("radixgate_match_ratio_count"));
    expect(sample("radixgate_worker_kv_usage")).toBeDefined();
    expect(sample("radixgate_worker_kv_usage")).toBe(sample("radixgate_worker_kv_usage_ratio"));
  });

  it("shows the engines' reported hit rate beside the router's own estimate", async () => {
    const dashboard = JSON.parse(await readFile(new URL("radixgate.json", DIR), "utf8"));
    const names = queriedMetrics(dashboard);
    for (const name of [
      "radixgate_engine_cached_tokens_total",
      "radixgate_engine_prompt_tokens_total",
      "radixgate_match_ratio_sum",
      "radixgate_worker_info",
    ])
      expect(names.has(name), name).toBe(true);
  });

  it("issue 26: stacks the cache account's parts (cached, index loss, routing loss by reason, cold)", async () => {
    const dashboard = JSON.parse(await readFile(new URL("radixgate.json", DIR), "utf8"));
    const panel = dashboard.panels.find((p: { title: string }) =>
      p.title.startsWith("Cache account"),
    );
    expect(panel.fieldConfig.defaults.custom.stacking.mode).toBe("normal");
    const names = queriedMetrics(panel);
    for (const part of [
      "prompt",
      "reported_cached",
      "index_loss",
      "unreported",
      "routing_loss",
      "cold",
    ])
      expect(names.has(`radixgate_cache_account_${part}_tokens_total`), part).toBe(true);
  });
});
