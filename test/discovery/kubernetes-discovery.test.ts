import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { UsageError } from "../../src/errors.js";
import type { RunningRouter } from "../../src/server.js";
import { listWorkers, longStream, servedBy } from "../helpers/discovery.js";
import {
  type FakeKubeApi,
  type Pod,
  recordedPod,
  setReady,
  startFakeKubeApi,
} from "../helpers/fake-kube-api.js";
import { captureLogs } from "../helpers/log-capture.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/** Wide: a watch event plus a health check (or a resume after backoff) on a loaded 2-core machine. */
const JOIN_MS = 10_000;
const TOKEN = "k8s-test-token-3f9c1e7a";

describe("--service-discovery against a fake API server replaying recorded list/watch responses (the client library is real)", () => {
  let dir: string;
  let api: FakeKubeApi;
  /**
   * Two pods' workers. Pods differ by IP on one port; here both listen on 127.0.0.1 (tests
   * listen nowhere else), so pod b names its port with the radixgate.io/port annotation.
   */
  let a: SimWorker;
  let b: SimWorker;
  let podA: Pod;
  let podB: Pod;
  let router: RunningRouter;
  const logs = captureLogs("debug");

  const urls = async () => (await listWorkers(router.url)).map((w) => w.url).sort();
  const lists = () => api.requests.filter((r) => r.kind === "list").length;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-k8s-"));
    api = await startFakeKubeApi();
    a = await startSimWorker({ id: "a", host: "127.0.0.1", timeScale: 1, stepFloorMs: 10 });
    b = await startSimWorker({
      id: "b",
      host: "127.0.0.1",
      timeScale: 1,
      stepFloorMs: 10,
    });
    podA = recordedPod("sglang-worker-a", "127.0.0.1");
    podB = recordedPod("sglang-worker-b", "127.0.0.1", {
      ready: false,
      annotations: { "radixgate.io/port": String(b.port) },
    });
    api.put(podA);
    api.put(podB);
    // Same labels, another namespace; and another app in this one: neither is a worker.
    api.put(recordedPod("elsewhere", "127.0.0.4", { namespace: "other" }));
    api.put(recordedPod("other-app", "127.0.0.5", { labels: { app: "vllm" } }));
    const kubeconfig = join(dir, "kubeconfig");
    await api.writeKubeconfig(kubeconfig, TOKEN);
    router = await startTestRouter(
      {
        serviceDiscovery: true,
        selector: ["app=sglang-sim", "role=worker"],
        serviceDiscoveryPort: a.port,
        serviceDiscoveryNamespace: "llm",
        kubeconfig,
        // Health checks on (a long interval): each new worker's first check gates its traffic.
        healthCheckIntervalSecs: 60,
        discoveryGraceSecs: 0,
        policy: "round_robin",
      },
      logs.logger,
    );
  });
  afterAll(async () => {
    await router?.stop(100);
    await api?.close();
    await Promise.all([a?.close(), b?.close()]);
    await rm(dir, { recursive: true, force: true });
  });

  it("at start: the running, ready pods matching the selector in the namespace are the workers", async () => {
    expect(await urls()).toEqual([a.url]);
    expect(await servedBy(router.url)).toBe("a");
    const first = api.requests[0]!;
    expect(first).toMatchObject({
      kind: "list",
      path: "/api/v1/namespaces/llm/pods",
      query: { labelSelector: "app=sglang-sim,role=worker" },
      authorization: `Bearer ${TOKEN}`,
    });
    await waitFor(() => api.openWatches() === 1, JOIN_MS, "the watch");
    expect(api.requests.at(-1)).toMatchObject({
      kind: "watch",
      authorization: `Bearer ${TOKEN}`,
    });
  });

  it("a pod that becomes ready joins and receives traffic", async () => {
    api.put(setReady(podB, true));
    await waitFor(async () => (await urls()).length === 2, JOIN_MS, "b to join");
    expect(await urls()).toEqual([a.url, b.url].sort());
    const seen = new Set([await servedBy(router.url, "1"), await servedBy(router.url, "2")]);
    expect(seen).toEqual(new Set(["a", "b"]));
  });

  it("a pod that becomes unready drains: no new request, its in-flight request completes", async () => {
    const inFlight = longStream(router.url, 120);
    // round_robin: the stream went to one of them; make that one unready.
    await waitFor(
      () => (router.context.registry.list().find((w) => w.inFlight === 1) ?? null) !== null,
      5000,
      "the stream to start",
    );
    const busy = router.context.registry.list().find((w) => w.inFlight === 1)!;
    const [leaving, leavingId, staying, stayingId] =
      busy.url === a.url ? [podA, "a", b, "b"] : [podB, "b", a, "a"];
    api.put(setReady(leaving, false));
    await waitFor(async () => (await urls()).length === 1, JOIN_MS, "the unready pod to leave");
    expect(await urls()).toEqual([staying.url]);
    for (let i = 0; i < 3; i++) expect(await servedBy(router.url, `after ${i}`)).toBe(stayingId);
    expect(await inFlight).toEqual({ status: 200, worker: leavingId, done: true });
    api.put(setReady(leaving, true));
    await waitFor(async () => (await urls()).length === 2, JOIN_MS, "back when ready");
  });

  it("a deleted pod leaves; a terminating one (deletionTimestamp) leaves at once", async () => {
    api.remove("llm", podB.metadata.name);
    await waitFor(async () => (await urls()).length === 1, JOIN_MS, "b deleted");
    expect(await urls()).toEqual([a.url]);
    api.put(podB); // recreated, ready
    await waitFor(async () => (await urls()).length === 2, JOIN_MS, "b recreated");
    api.put({
      ...podB,
      metadata: { ...podB.metadata, deletionTimestamp: "2026-11-25T21:00:00Z" },
    });
    await waitFor(async () => (await urls()).length === 1, JOIN_MS, "b terminating");
    expect(await urls()).toEqual([a.url]);
  });

  it("a dropped watch is resumed from the last resourceVersion seen (no new list), missing nothing", async () => {
    api.put(podB); // no deletionTimestamp: b is back
    await waitFor(async () => (await urls()).length === 2, JOIN_MS, "b back");
    const listsBefore = lists();
    const watchesBefore = api.requests.filter((r) => r.kind === "watch").length;
    const seen = api.version();
    api.dropWatches();
    // Changed while no watch is open: the resumed watch replays it.
    api.remove("llm", podB.metadata.name);
    await waitFor(async () => (await urls()).length === 1, JOIN_MS, "the change made while down");
    expect(await urls()).toEqual([a.url]);
    const resumed = api.requests.filter((r) => r.kind === "watch").slice(watchesBefore);
    expect(resumed.length).toBeGreaterThanOrEqual(1);
    expect(resumed[0]!.query.resourceVersion).toBe(seen);
    expect(lists()).toBe(listsBefore);
  });

  it.each(["event", "status"] as const)(
    "410 Gone on resume (history compacted; as an ERROR %s) lists again: the list replaces the set",
    async (how) => {
      api.put(podB);
      await waitFor(async () => (await urls()).length === 2, JOIN_MS, "b back");
      const listsBefore = lists();
      api.dropWatches();
      api.remove("llm", podB.metadata.name);
      api.compact(how);
      await waitFor(() => lists() > listsBefore, JOIN_MS, "a new list (resync)");
      await waitFor(async () => (await urls()).length === 1, JOIN_MS, "b gone after the resync");
      expect(await urls()).toEqual([a.url]);
      expect(
        logs.entries.some(
          (e) => e.msg === "pod watch: resource version expired (410 Gone), listing again",
        ),
      ).toBe(true);
      await waitFor(() => api.openWatches() === 1, JOIN_MS, "watching again");
      // And changes flow again after it.
      api.put(podB);
      await waitFor(async () => (await urls()).length === 2, JOIN_MS, "b after the resync");
    },
  );

  it("an API server that refuses (403) is retried with the workers kept; the token is never logged", async () => {
    api.forbid(2);
    api.dropWatches();
    await waitFor(
      () => logs.entries.some((e) => String(e.msg).startsWith("pod watch refused")),
      JOIN_MS,
      "the refusal logged",
    );
    expect(await urls()).toEqual([a.url, b.url].sort());
    await waitFor(() => api.openWatches() === 1, JOIN_MS, "watching again");
    api.remove("llm", podA.metadata.name);
    await waitFor(async () => (await urls()).length === 1, JOIN_MS, "a deleted");
    expect(logs.lines.join("\n")).not.toContain(TOKEN);
  });
});

describe("--service-discovery without a Kubernetes configuration", () => {
  it("stops the start like a bad flag (exit 2), naming --kubeconfig", async () => {
    const start = startTestRouter({
      serviceDiscovery: true,
      selector: ["app=sglang"],
      kubeconfig: join(tmpdir(), "radixgate-no-such-kubeconfig"),
    });
    await expect(start).rejects.toBeInstanceOf(UsageError);
    await expect(start).rejects.toThrow(/no Kubernetes configuration .*give --kubeconfig PATH/);
  });
});

describe("--service-discovery without --service-discovery-namespace watches every namespace (fake API server, recorded responses)", () => {
  it("lists and watches /api/v1/pods: a matching pod of any namespace is a worker", async () => {
    const dir = await mkdtemp(join(tmpdir(), "radixgate-k8s-all-"));
    const api = await startFakeKubeApi();
    const worker = await startSimWorker({ id: "w", host: "127.0.0.1" });
    let router: RunningRouter | undefined;
    try {
      api.put(recordedPod("in-other-namespace", "127.0.0.1", { namespace: "team-b" }));
      const kubeconfig = join(dir, "kubeconfig");
      await api.writeKubeconfig(kubeconfig, "t");
      router = await startTestRouter({
        serviceDiscovery: true,
        selector: ["app=sglang-sim"],
        serviceDiscoveryPort: worker.port,
        kubeconfig,
      });
      expect((await listWorkers(router.url)).map((w) => w.url)).toEqual([worker.url]);
      expect(api.requests[0]).toMatchObject({ kind: "list", path: "/api/v1/pods" });
      await waitFor(() => api.openWatches() === 1, JOIN_MS, "the watch");
      expect(api.requests.at(-1)).toMatchObject({ kind: "watch", path: "/api/v1/pods" });
    } finally {
      await router?.stop(100);
      await api.close();
      await worker.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
