import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { openRequest, type RawRequest, sleep } from "./raw-client.js";

const PAYLOAD = 100_000;
const JSON_HEADERS = { "content-type": "application/json" };
/** Another loopback address: another client, as the router sees it. */
const OTHER_CLIENT = "127.0.0.2";

function declaring(router: RunningRouter, bytes: number, from?: string): RawRequest {
  return openRequest(
    router.url,
    "/v1/completions",
    { ...JSON_HEADERS, "content-length": bytes },
    from,
  );
}

function errorOf(answer: { body: string }): { code: string; message: string } {
  return (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
}

// Regression: 16 sockets each declaring 64 MiB and sending 500 B/s reserved the whole body budget
// up front, and every other request, even 30 bytes, got 503 body_buffer_full.
describe("slow uploads cannot take the body budget", () => {
  let sim: SimWorker;
  /** Budget of 4 maximal bodies, no per-address share: only the declared-length rule is at work. */
  let router: RunningRouter;
  /** The same budget, and one address may hold one maximal body. */
  let sharedRouter: RunningRouter;
  /** A 10 s read limit: a body declaring 100 kB must come at 10 kB/s at least. */
  let paceRouter: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    const common = {
      workerUrls: [sim.url],
      maxPayloadSize: PAYLOAD,
      maxBodyBufferBytes: 4 * PAYLOAD,
    };
    router = await startTestRouter({ ...common, maxBodyBufferBytesPerClient: 0 });
    sharedRouter = await startTestRouter({ ...common, maxBodyBufferBytesPerClient: PAYLOAD });
    paceRouter = await startTestRouter({
      workerUrls: [sim.url],
      maxPayloadSize: PAYLOAD,
      bodyIdleTimeoutSecs: 0.3,
      bodyReadTimeoutSecs: 10,
      bodyMinRateBytes: 500,
    });
  });
  afterAll(async () => {
    await Promise.all([router.stop(100), sharedRouter.stop(100), paceRouter.stop(100)]);
    await sim.close();
  });

  it("a declared Content-Length is not reserved before its bytes arrive", async () => {
    const slow = Array.from({ length: 8 }, () => declaring(router, PAYLOAD, OTHER_CLIENT));
    for (const s of slow) await s.write('{"prompt": "');
    await waitFor(() => router.context.bodyBudget.inUse === 8 * 12, 3000, "bytes counted");
    const res = await postJson(`${router.url}/v1/completions`, { prompt: "hi", max_tokens: 1 });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    for (const s of slow) s.socket.destroy();
    await waitFor(() => router.context.bodyBudget.inUse === 0, 3000, "budget empty");
  });

  it("one address holds at most its share; other clients keep being served", async () => {
    const first = declaring(sharedRouter, PAYLOAD, OTHER_CLIENT);
    await first.write("x".repeat(PAYLOAD - 10));
    await waitFor(
      () => sharedRouter.context.bodyBudget.heldBy(OTHER_CLIENT) === PAYLOAD - 10,
      3000,
      "first body held",
    );
    const second = declaring(sharedRouter, PAYLOAD, OTHER_CLIENT);
    await second.write("x".repeat(100));
    const refused = await second.answer;
    expect(refused.status).toBe(503);
    expect(refused.headers["retry-after"]).toBe("1");
    expect(errorOf(refused).code).toBe("body_buffer_full");
    expect(errorOf(refused).message).toContain("--max-body-buffer-bytes-per-client");

    const res = await postJson(`${sharedRouter.url}/v1/completions`, {
      prompt: "hi",
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    first.socket.destroy();
    second.socket.destroy();
    await waitFor(() => sharedRouter.context.bodyBudget.inUse === 0, 3000, "budget empty");
  });

  it("the larger the declared body, the faster it must come: 408 once it falls behind", async () => {
    const req = declaring(paceRouter, PAYLOAD);
    let answered = false;
    void req.answer.finally(() => {
      answered = true;
    });
    // 4 kB/s: well over --body-min-rate-bytes, far under the 10 kB/s that 100 kB in 10 s needs.
    const drip = (async () => {
      while (!answered && (await req.write("x".repeat(200)))) await sleep(50);
    })();
    const answer = await req.answer;
    expect(answer.status).toBe(408);
    expect(errorOf(answer).code).toBe("body_timeout");
    expect(errorOf(answer).message).toMatch(/pace its Content-Length needs/);
    await drip;
    req.socket.destroy();
  }, 20_000);
});
