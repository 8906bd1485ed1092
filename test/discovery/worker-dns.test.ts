import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseDnsTarget } from "../../src/discovery/worker-dns.js";
import type { RunningRouter } from "../../src/server.js";
import { listWorkers, longStream, servedBy } from "../helpers/discovery.js";
import { dnsmasqSkipReason, startDnsmasq, type TestDnsmasq } from "../helpers/dnsmasq.js";
import { captureLogs } from "../helpers/log-capture.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/** Wide: "one interval plus a health check" on a loaded 2-core machine. */
const JOIN_MS = 10_000;

describe("parseDnsTarget", () => {
  it("splits NAME[:PORT]", () => {
    expect(parseDnsTarget("workers.llm.svc:30000")).toEqual({
      name: "workers.llm.svc",
      port: 30000,
    });
    expect(parseDnsTarget("_sglang._tcp.workers.")).toEqual({
      name: "_sglang._tcp.workers",
      port: undefined,
    });
  });
});

describe.skipIf(dnsmasqSkipReason !== undefined)(
  "--worker-dns against a real DNS server (dnsmasq on 127.0.0.1) whose records change",
  () => {
    let dnsmasq: TestDnsmasq;
    let a: SimWorker;
    let b: SimWorker;
    /** --worker-dns a.discovery.test:PORT (A records). */
    let byA: RunningRouter;
    /** --worker-dns _sim._tcp.discovery.test (SRV records: targets and ports). */
    let bySrv: RunningRouter;
    const logs = captureLogs("info");
    const urls = async (router: RunningRouter) =>
      (await listWorkers(router.url)).map((w) => w.url).sort();

    beforeAll(async () => {
      [a, b] = await Promise.all([
        startSimWorker({ id: "a", timeScale: 1, stepFloorMs: 10 }),
        startSimWorker({ id: "b", timeScale: 1, stepFloorMs: 10 }),
      ]);
      dnsmasq = await startDnsmasq([
        { name: "_sim._tcp.discovery.test", target: "a.discovery.test", port: a.port },
        { name: "_sim._tcp.discovery.test", target: "b.discovery.test", port: b.port },
      ]);
      const common = {
        dnsIntervalSecs: 0.2,
        dnsTimeoutSecs: 1,
        // Health checks on (a long interval): each new worker's first check gates its traffic.
        healthCheckIntervalSecs: 60,
        discoveryGraceSecs: 0,
        policy: "round_robin" as const,
      };
      // Only the test's dnsmasq is ever asked.
      byA = await startTestRouter(
        { ...common, workerDns: `a.discovery.test:${a.port}` },
        logs.logger,
        { dnsResolver: dnsmasq.resolver() },
      );
      bySrv = await startTestRouter(
        { ...common, workerDns: "_sim._tcp.discovery.test" },
        undefined,
        {
          dnsResolver: dnsmasq.resolver(),
        },
      );
    });
    afterAll(async () => {
      await Promise.all([byA?.stop(100), bySrv?.stop(100)]);
      await dnsmasq?.stop();
      await Promise.all([a?.close(), b?.close()]);
    });

    it("a name without records gives no workers", async () => {
      expect(await urls(byA)).toEqual([]);
      expect(await servedBy(byA.url)).toBe("status 503");
    });

    it("a worker added to DNS takes traffic within one interval plus a health check", async () => {
      await dnsmasq.setHosts(["127.0.0.1 a.discovery.test"]);
      await waitFor(async () => (await servedBy(byA.url)) === "a", JOIN_MS, "a to serve");
      expect(await urls(byA)).toEqual([a.url]);
    });

    it("a worker removed from DNS gets no new request, and its in-flight request completes", async () => {
      // Slowed (a step of 0.5 s: the stream lasts a minute) so that it is surely still in flight
      // when a leaves, however slow the machine; sped up again once a is out.
      a.setFaults({ slowdown: 50 });
      let settled = false;
      const inFlight = longStream(byA.url, 120).finally(() => {
        settled = true;
      });
      await waitFor(() => byA.context.registry.get(a.url)?.inFlight === 1, 5000, "a busy");
      await dnsmasq.setHosts([]);
      await waitFor(async () => (await urls(byA)).length === 0, JOIN_MS, "a removed");
      expect(await servedBy(byA.url)).toBe("status 503");
      expect(settled).toBe(false);
      a.setFaults({ slowdown: 1 });
      expect(await inFlight).toEqual({ status: 200, worker: "a", done: true });
    });

    it("SRV records: every target's address on the record's port; a target that loses its address leaves", async () => {
      await dnsmasq.setHosts(["127.0.0.1 a.discovery.test", "127.0.0.1 b.discovery.test"]);
      await waitFor(async () => (await urls(bySrv)).length === 2, JOIN_MS, "both SRV targets");
      expect(await urls(bySrv)).toEqual([a.url, b.url].sort());
      const seen = new Set([await servedBy(bySrv.url, "1"), await servedBy(bySrv.url, "2")]);
      expect(seen).toEqual(new Set(["a", "b"]));

      await dnsmasq.setHosts(["127.0.0.1 a.discovery.test"]);
      await waitFor(async () => (await urls(bySrv)).length === 1, JOIN_MS, "b removed");
      expect(await urls(bySrv)).toEqual([a.url]);
      for (let i = 0; i < 4; i++) expect(await servedBy(bySrv.url, `after ${i}`)).toBe("a");
    });

    it("a failed lookup (the DNS server is gone) keeps the last answer", async () => {
      await waitFor(async () => (await urls(byA)).length === 1, JOIN_MS, "a back in byA");
      const failures = () =>
        logs.entries.filter((e) => e.msg === "worker DNS lookup failed: the last answer stands")
          .length;
      const before = failures();
      await dnsmasq.kill();
      await waitFor(() => failures() >= before + 2, JOIN_MS, "two failed lookups");
      expect(await urls(byA)).toEqual([a.url]);
      expect(await servedBy(byA.url)).toBe("a");
    });
  },
);
