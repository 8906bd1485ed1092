import { describe, expect, it } from "vitest";
import type { PodApi, PodListPage } from "../../src/discovery/kubernetes-client.js";
import { PodListWatch } from "../../src/discovery/kubernetes-watch.js";
import { createLogger } from "../../src/logger.js";
import { recordedPod } from "../helpers/fake-kube-api.js";
import { waitFor } from "../helpers/router.js";

/** A PodApi whose watches open and then say nothing (or never answer), recording each call. */
function silentApi(watchAnswers: boolean): PodApi & { watches: string[]; aborted: number } {
  const api = {
    server: "memory",
    watches: [] as string[],
    aborted: 0,
    async list(): Promise<PodListPage> {
      return { items: [recordedPod("p", "10.0.0.1")], resourceVersion: "7" };
    },
    async watch(query: { resourceVersion: string }) {
      api.watches.push(query.resourceVersion);
      if (!watchAnswers) await new Promise(() => {});
      return () => {
        api.aborted++;
      };
    },
  };
  return api;
}

const options = {
  query: { namespace: "llm", labelSelector: "app=sglang-sim" },
  pageSize: 500,
  maxPods: 10,
  watchTimeoutSecs: 300,
  stallMs: 50,
  retryInitialMs: 10,
  retryMaxMs: 20,
};

describe("PodListWatch: no wait without a bound", () => {
  it("a watch with no event within the stall limit is ended and resumed from the same version", async () => {
    const api = silentApi(true);
    const watch = new PodListWatch(api, options, () => {}, createLogger({ level: "silent" }));
    await watch.start();
    await waitFor(() => api.watches.length >= 3, 5000, "resumed watches");
    watch.stop();
    expect(new Set(api.watches)).toEqual(new Set(["7"]));
    expect(api.aborted).toBeGreaterThanOrEqual(2);
    expect([...watch.pods.keys()]).toEqual(["llm/p"]);
  });

  it("a watch whose response never starts is given up after the stall limit, and another started", async () => {
    const api = silentApi(false);
    const watch = new PodListWatch(api, options, () => {}, createLogger({ level: "silent" }));
    await watch.start();
    await waitFor(() => api.watches.length >= 2, 5000, "a second watch");
    watch.stop();
  });

  it("a list that fails is retried; start() does not wait for it to succeed", async () => {
    let calls = 0;
    const api: PodApi = {
      server: "memory",
      async list() {
        calls++;
        if (calls < 3) throw Object.assign(new Error("HTTP-Code: 503"), { code: 503 });
        return { items: [], resourceVersion: "1" };
      },
      async watch() {
        return () => {};
      },
    };
    let changes = 0;
    const watch = new PodListWatch(
      api,
      options,
      () => changes++,
      createLogger({ level: "silent" }),
    );
    await watch.start();
    expect(calls).toBe(1);
    await waitFor(() => changes === 1, 5000, "the list to succeed");
    expect(calls).toBe(3);
    watch.stop();
  });
});
