import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

const PROMPT = "You are the travel desk's assistant; answer briefly and politely. ".repeat(6);

interface Explained {
  policy: string;
  profile?: string;
  picker?: string;
  failed_open?: string[];
  decision: { worker: string; branch: string } | null;
  candidates: {
    worker: string;
    filtered_by: string | null;
    scores: Record<string, { score: number; weight: number }>;
    total_score: number | null;
  }[];
}

describe("scheduling profiles through the router", () => {
  let sims: SimWorker[];
  const routers: RunningRouter[] = [];
  beforeAll(async () => {
    sims = await Promise.all(["a", "b", "c"].map((id) => startSimWorker({ id, timeScale: 0 })));
  });
  afterAll(async () => {
    await Promise.all(routers.map((r) => r.stop(100)));
    await Promise.all(sims.map((s) => s.close()));
  });
  const start = async (overrides: Parameters<typeof startTestRouter>[0]) => {
    const router = await startTestRouter({ workerUrls: sims.map((s) => s.url), ...overrides });
    routers.push(router);
    return router;
  };

  it("llmd_approx: the header names the profile, /metrics counts it by picker outcome", async () => {
    const router = await start({ policy: "llmd_approx" });
    for (let i = 0; i < 2; i++) {
      const res = await postJson(`${router.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      expect(res.headers.get("x-radixgate-route")).toMatch(
        /^max_score(_tie)?;match=\d\.\d\d;index=block_hash;profile=llmd_approx$/,
      );
    }
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    expect(metrics).toMatch(
      /radixgate_routing_decisions_total\{policy="llmd_approx",branch="max_score(_tie)?"\} \d/,
    );
  });

  it("POST /debug/route shows every scorer's score and weight per candidate", async () => {
    const router = await start({ policy: "llmd_approx" });
    const sent = await postJson(`${router.url}/v1/completions`, { prompt: PROMPT, max_tokens: 1 });
    await sent.arrayBuffer();
    const holder = sent.headers.get("x-radixgate-worker");
    const res = await postJson(`${router.url}/debug/route/v1/completions`, { prompt: PROMPT });
    const out = (await res.json()) as Explained;
    expect(out).toMatchObject({
      policy: "llmd_approx",
      profile: "llmd_approx",
      picker: "max-score-picker",
    });
    expect(out.decision?.worker).toBe(holder);
    for (const c of out.candidates) {
      expect(c.filtered_by).toBeNull();
      expect(Object.keys(c.scores).sort()).toEqual([
        "kv-cache-utilization-scorer",
        "prefix-cache-scorer",
        "queue-scorer",
      ]);
      expect(c.scores["prefix-cache-scorer"]).toEqual({
        score: c.worker === holder ? 1 : 0,
        weight: 3,
      });
      expect(c.scores["queue-scorer"]!.weight).toBe(2);
      expect(c.scores["kv-cache-utilization-scorer"]!.weight).toBe(2);
    }
  });

  it("--scheduler-config: the file's profile routes; /debug/route names the filter that removed a worker", async () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-sched-"));
    const file = join(dir, "scheduler.yaml");
    writeFileSync(
      file,
      [
        "apiVersion: inference.networking.x-k8s.io/v1alpha1",
        "kind: EndpointPickerConfig",
        "plugins:",
        "- type: saturation-filter",
        "  parameters: {queueDepthThreshold: 3}",
        "- type: active-request-scorer",
        "- type: max-score-picker",
        "schedulingProfiles:",
        "- name: mine",
        "  plugins:",
        "  - pluginRef: saturation-filter",
        "  - pluginRef: active-request-scorer",
        "    weight: 1",
        "  - pluginRef: max-score-picker",
        "",
      ].join("\n"),
    );
    const router = await start({ schedulerConfig: file });
    const [first] = router.context.registry.list();
    first!.signals.recordLoad({ queued: 9, running: 1, kvUsage: 0.5 }, Date.now());
    const res = await postJson(`${router.url}/debug/route/v1/completions`, { prompt: "hello" });
    const out = (await res.json()) as Explained;
    expect(out.policy).toBe("mine");
    const saturated = out.candidates.find((c) => c.worker === first!.id)!;
    expect(saturated).toMatchObject({
      filtered_by: "saturation-filter",
      scores: {},
      total_score: null,
    });
    expect(out.decision?.worker).not.toBe(first!.id);
    const sent = await postJson(`${router.url}/v1/completions`, { prompt: "hello", max_tokens: 1 });
    await sent.arrayBuffer();
    expect(sent.headers.get("x-radixgate-route")).toMatch(/;profile=mine$/);
  });
});
