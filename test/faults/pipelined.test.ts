import { connect } from "node:net";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { startedPerTest } from "./support.js";

const PIPELINED = 40;

/** `count` chat POSTs written back to back on one connection (HTTP/1.1 pipelining). */
function pipelined(count: number): string {
  let out = "";
  for (let i = 0; i < count; i++) {
    const body = JSON.stringify({
      model: "m",
      messages: [{ role: "user", content: `pipelined request ${i}` }],
      max_tokens: 5,
    });
    out +=
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  }
  return out;
}

// Regression: 1,000 pipelined POSTs on a connection closed after 50 ms all reached the engines,
// and with --max-concurrent-requests 1 they stayed queued after the client had gone.
describe("pipelined requests do not outlive their connection", () => {
  const started = startedPerTest();

  it("closing the connection cancels every request read from it: queued, waiting or in flight", async () => {
    // 5 tokens at 40 ms a step: each answer takes about 200 ms, one at a time.
    started.sims = [await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 40 })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      maxConcurrentRequests: 1,
      queueTimeoutSecs: 60,
    });
    const { router } = started;
    const { hostname, port } = new URL(router.url);
    const socket = connect({ host: hostname, port: Number(port) });
    socket.on("error", () => {});
    socket.write(pipelined(PIPELINED));
    await waitFor(() => sim.stats().running === 1, 3000, "the first request at the worker");
    await waitFor(() => router.context.state.active > 1, 3000, "the others read and waiting");
    socket.destroy();

    await waitFor(
      () => router.context.state.active === 0,
      3000,
      () => {
        return `every request to end (${router.context.state.active} still active)`;
      },
    );
    await waitFor(() => sim.stats().inFlight === 0, 3000, "the worker to be free");
    // The one in flight when the connection closed, perhaps one more admitted at that moment.
    expect(sim.stats().requests).toBeLessThanOrEqual(2);
  });

  it("serves a connection's pipelined requests one at a time, in order, each answered", async () => {
    // 10 requests of about 100 ms each at the worker: served at once, they would be there together.
    started.sims = [await startSimWorker({ id: "paced", timeScale: 1, stepFloorMs: 20 })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({ workerUrls: [sim.url] });
    const { hostname, port } = new URL(started.router.url);
    const socket = connect({ host: hostname, port: Number(port) });
    let answers = "";
    socket.on("data", (chunk: Buffer) => {
      answers += chunk.toString("latin1");
    });
    socket.write(pipelined(10));
    let most = 0;
    const sampler = setInterval(() => {
      most = Math.max(most, sim.stats().inFlight);
    }, 2);
    try {
      await waitFor(
        () => (answers.match(/HTTP\/1\.1 200/g) ?? []).length === 10,
        10_000,
        () => `10 answers (${(answers.match(/HTTP\/1\.1 \d+/g) ?? []).join(", ")})`,
      );
    } finally {
      clearInterval(sampler);
      socket.destroy();
    }
    expect(most).toBe(1);
    expect(sim.stats().requests).toBe(10);
  });
});
