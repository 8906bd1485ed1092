/**
 * A reading of an engine takes time, and this router's requests there change meanwhile. The
 * engine's snapshot falls somewhere in the read, so what of it is this router's is at most the
 * most the router had there during the read. Counting from the least instead turned an end (or a
 * dispatch) during the read into one slot of "other" work that no one held, until the next
 * reading: a free slot the release rule then kept empty, and a light request held for it.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import type { WorkerLease } from "../../src/workers/lease.js";
import { freeSlots } from "../../src/workers/saturation.js";
import type { Worker } from "../../src/workers/worker.js";
import { startTestRouter } from "../helpers/router.js";

/**
 * An engine that answers /metrics with the running count `answer` gives: what it does meanwhile
 * (the router's requests there ending, or dispatched) falls inside the router's read.
 */
async function engine(answer: () => number): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (req.url !== "/metrics") {
      res.statusCode = 404;
      res.end();
      return;
    }
    const running = answer();
    res.setHeader("content-type", "text/plain");
    res.end(
      [
        `sglang:num_running_reqs ${running}`,
        "sglang:num_queue_reqs 0",
        "sglang:token_usage 0.1",
        "",
      ].join("\n"),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, server };
}

describe("free slots after a reading that spans this router's own changes", () => {
  let router: RunningRouter | undefined;
  let server: Server | undefined;
  afterEach(async () => {
    await router?.stop();
    await new Promise((r) => server?.close(r));
    router = undefined;
    server = undefined;
  });

  /**
   * A router over one such engine (a cap of 4) with 3 of its requests there; the engine runs
   * exactly this router's requests (no other work anywhere). `during` runs inside the next read
   * and returns the engine's snapshot.
   */
  async function setUp(during: (worker: Worker, leases: WorkerLease[]) => number) {
    let armed = false;
    const leases: WorkerLease[] = [];
    let worker: Worker | undefined;
    const e = await engine(() => {
      const w = worker as Worker;
      if (!armed) return w.ownInFlight;
      armed = false;
      return during(w, leases);
    });
    server = e.server;
    router = await startTestRouter({
      workerUrls: [e.url],
      queueWhenSaturated: true,
      workerMaxRunning: 4,
      enginePollIntervalSecs: 60,
    });
    worker = router.context.registry.list()[0] as Worker;
    await router.context.introspection.pollAll();
    for (let i = 0; i < 3; i++) leases.push(worker.dispatch({ textChars: 10, uncachedChars: 10 }));
    armed = true;
    await router.context.introspection.pollAll();
    expect(armed).toBe(false);
    return worker;
  }

  const ANSWERED = { kind: "answered", status: 200 } as const;

  it("an end during the read frees its slot at once, not at the next reading", async () => {
    const worker = await setUp((w, leases) => {
      const snapshot = w.ownInFlight;
      leases.pop()?.finish(ANSWERED);
      return snapshot;
    });
    expect(worker.ownInFlight).toBe(2);
    // The engine said 3 running, all of them this router's, 2 of which are left: 2 free of 4.
    expect(freeSlots(worker, Date.now())).toBe(2);
  });

  it("a dispatch, then another request's end, both within the read, leave no work of others", async () => {
    const worker = await setUp((w, leases) => {
      leases.push(w.dispatch({ textChars: 10, uncachedChars: 10 }));
      // The engine's snapshot between the two: the new one in, the old one not yet out.
      const snapshot = w.ownInFlight;
      leases.shift()?.finish(ANSWERED);
      return snapshot;
    });
    expect(worker.ownInFlight).toBe(3);
    expect(freeSlots(worker, Date.now())).toBe(1);
  });
});
