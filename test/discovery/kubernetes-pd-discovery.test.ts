import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { listWorkers } from "../helpers/discovery.js";
import {
  type FakeKubeApi,
  type Pod,
  recordedPod,
  setReady,
  startFakeKubeApi,
} from "../helpers/fake-kube-api.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const JOIN_MS = 10_000;
describe("--pd-disaggregation --service-discovery --prefill-selector --decode-selector against a fake API server replaying recorded list/watch responses", () => {
  let dir: string;
  let api: FakeKubeApi;
  let prefill: SimWorker;
  let decode: SimWorker;
  let prefillPod: Pod;
  let decodePod: Pod;
  let router: RunningRouter;

  // A worker is listed as soon as it joins, but takes traffic only once its first health check
  // has passed (workers/health.ts probeFirst): wait for both.
  const pairReady = async () => {
    const rows = await listWorkers(router.url);
    return rows.length === 2 && rows.every((row) => row.healthy === true);
  };

  const chat = () =>
    postJson(`${router.url}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "Where is parcel 7?" }],
      max_tokens: 4,
    });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-k8s-pd-"));
    api = await startFakeKubeApi();
    prefill = await startSimWorker({
      id: "p1",
      host: "127.0.0.1",
      role: "prefill",
      timeScale: 0,
    });
    decode = await startSimWorker({
      id: "d1",
      host: "127.0.0.1",
      role: "decode",
      timeScale: 0,
    });
    // SGLang's PD pods: one Deployment per role, the prefill pods announcing their bootstrap
    // server's port in the annotation the router reads.
    prefillPod = recordedPod("sglang-prefill-0", "127.0.0.1", {
      labels: { app: "sglang", component: "prefill" },
      annotations: { "sglang.ai/bootstrap-port": String(prefill.bootstrapPort) },
    });
    // Tests listen on 127.0.0.1 only: the decode pod names its own port (radixgate.io/port).
    decodePod = recordedPod("sglang-decode-0", "127.0.0.1", {
      labels: { app: "sglang", component: "decode" },
      annotations: { "radixgate.io/port": String(decode.port) },
      ready: false,
    });
    api.put(prefillPod);
    api.put(decodePod);
    const kubeconfig = join(dir, "kubeconfig");
    await api.writeKubeconfig(kubeconfig, "pd-token");
    // SGLang's documented PD discovery launch line, flag for flag.
    router = await startTestRouter({
      pdDisaggregation: true,
      serviceDiscovery: true,
      prefillSelector: ["app=sglang", "component=prefill"],
      decodeSelector: ["app=sglang", "component=decode"],
      serviceDiscoveryNamespace: "llm",
      serviceDiscoveryPort: prefill.port,
      kubeconfig,
      healthCheckIntervalSecs: 60,
      discoveryGraceSecs: 0,
    });
  });
  afterAll(async () => {
    await router?.stop(100);
    await api?.close();
    await Promise.all([prefill?.close(), decode?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it("each selector's pods join in its role; the prefill pod's bootstrap port is its annotation", async () => {
    expect(api.requests.filter((r) => r.kind === "list").map((r) => r.query.labelSelector)).toEqual(
      ["app=sglang,component=prefill", "app=sglang,component=decode"],
    );
    const rows = await listWorkers(router.url);
    expect(rows).toEqual([
      expect.objectContaining({
        url: prefill.url,
        worker_type: "prefill",
        bootstrap_port: prefill.bootstrapPort,
      }),
    ]);
    // No decode worker yet (its pod is not ready): the pair cannot be made.
    expect((await chat()).status).toBe(503);
  });

  it("the decode pod becoming ready completes the pair: requests are served through both", async () => {
    api.put(setReady(decodePod, true));
    await waitFor(pairReady, JOIN_MS, "decode");
    const decodeRow = (await listWorkers(router.url)).find((w) => w.url === decode.url);
    expect(decodeRow).toMatchObject({ worker_type: "decode" });
    const before = prefill.stats().requests;
    const res = await chat();
    expect(res.status).toBe(200);
    // The decode side answered, having fetched the KV from the bootstrap port it was given.
    expect(res.headers.get("x-sim-worker-id")).toBe("d1");
    await res.arrayBuffer();
    expect(prefill.stats().requests).toBe(before + 1);
  });

  it("a prefill pod deleted leaves its role: the pair cannot be made again until one returns", async () => {
    api.remove("llm", prefillPod.metadata.name);
    await waitFor(
      async () => (await listWorkers(router.url)).length === 1,
      JOIN_MS,
      "prefill gone",
    );
    expect((await chat()).status).toBe(503);
    api.put(prefillPod);
    await waitFor(pairReady, JOIN_MS, "prefill back");
    expect((await chat()).status).toBe(200);
  });
});
