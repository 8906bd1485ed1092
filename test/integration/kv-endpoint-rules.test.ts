/**
 * Issue 20 item 5: KV-event endpoints given to POST /workers are checked by the worker-URL rules
 * (no link-local or metadata host in any spelling, sane ports, ipc:// only behind a flag) before
 * the router connects to them; a refused endpoint leaves no worker registered.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

describe("KV-event endpoint rules (issue 20 item 5)", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.splice(0).map((f) => f()));
  });

  async function router(overrides: Record<string, unknown> = {}): Promise<{
    router: RunningRouter;
    sim: SimWorker;
  }> {
    const sim = await startSimWorker({ id: "kv", timeScale: 0, kvEvents: { encoding: "array" } });
    const r = await startTestRouter({ kvEvents: true, ...overrides });
    cleanup.push(async () => {
      await r.stop(100);
      await sim.close();
    });
    return { router: r, sim };
  }

  it.each([
    ["tcp://169.254.169.254:5557", /link-local/],
    ["tcp://[::ffff:169.254.169.254]:5557", /link-local/],
    ["tcp://[::a9fe:a9fe]:5557", /link-local/],
    ["tcp://[64:ff9b::a9fe:a9fe]:5557", /link-local/],
    ["tcp://2852039166:5557", /link-local/],
    ["tcp://0xa9fea9fe:5557", /link-local/],
    ["tcp://metadata.google.internal:5557", /metadata/],
    ["tcp://10.0.0.1:22", /port 22/],
    ["tcp://10.0.0.1:0", /port 0/],
    ["tcp://10.0.0.1:70000", /port 70000/],
    ["tcp://*:5557", /not a host/],
    ["tcp://10.0.0.2;10.0.0.1:5557", /ZMQ endpoint|not a host/],
    ["ipc:///var/run/docker.sock", /--kv-events-allow-ipc/],
    ["inproc://x", /ZMQ endpoint/],
  ])(
    "POST /workers refuses kv_events_endpoint %s with 400 and registers nothing",
    async (endpoint, message) => {
      const { router: r, sim } = await router();
      const res = await postJson(`${r.url}/workers`, {
        url: sim.url,
        kv_events_endpoint: endpoint,
      });
      const body = (await res.json()) as { error?: { code: string; message: string } };
      expect(res.status).toBe(400);
      expect(body.error?.code).toBe("invalid_request");
      expect(body.error?.message).toMatch(message);
      expect(r.context.registry.size).toBe(0);
    },
  );

  it("refuses a replay endpoint by the same rules", async () => {
    const { router: r, sim } = await router();
    const res = await postJson(`${r.url}/workers`, {
      url: sim.url,
      kv_events_endpoint: sim.kvEvents?.endpoint,
      kv_events_replay_endpoint: "tcp://[fe80::1]:5558",
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
      /kv_events_replay_endpoint.*link-local/,
    );
    expect(r.context.registry.size).toBe(0);
  });

  it("accepts the engine's own endpoint, and ipc:// with --kv-events-allow-ipc", async () => {
    const { router: r, sim } = await router({ kvEventsAllowIpc: true });
    const ok = await postJson(`${r.url}/workers`, {
      url: sim.url,
      kv_events_endpoint: sim.kvEvents?.endpoint,
    });
    expect(ok.status).toBe(202);
    await ok.arrayBuffer();
    const other = await startSimWorker({ id: "ipc", timeScale: 0 });
    cleanup.push(() => other.close());
    const ipc = await postJson(`${r.url}/workers`, {
      url: other.url,
      kv_events_endpoint: "ipc:///tmp/radixgate-test-kv.sock",
    });
    expect(ipc.status).toBe(202);
    await ipc.arrayBuffer();
  });
});
