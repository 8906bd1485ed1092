import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";
import { chunk, openRequest, sleep } from "./raw-client.js";

const JSON_HEADERS = { "content-type": "application/json" };

describe("reading request bodies is bounded in time (issue 10 item 3)", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  /** A longer idle limit, so only the minimum rate can cut a steady drip off. */
  let dripRouter: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({
      workerUrls: [sim.url],
      bodyIdleTimeoutSecs: 0.5,
      bodyReadTimeoutSecs: 1.5,
      bodyMinRateBytes: 0,
    });
    dripRouter = await startTestRouter({
      workerUrls: [sim.url],
      bodyIdleTimeoutSecs: 1.5,
      bodyReadTimeoutSecs: 60,
      bodyMinRateBytes: 200,
    });
  });
  afterAll(async () => {
    await router.stop(100);
    await dripRouter.stop(100);
    await sim.close();
  });

  function expectBodyTimeout(answer: { status: number; body: string }, why: RegExp): void {
    expect(answer.status).toBe(408);
    const error = (JSON.parse(answer.body) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("body_timeout");
    expect(error.message).toMatch(why);
  }

  it("part of a body, then silence: 408 body_timeout after the idle limit, connection closed", async () => {
    const before = sim.stats().requests;
    const req = openRequest(router.url, "/v1/completions", {
      ...JSON_HEADERS,
      "content-length": 100,
    });
    await req.write('{"prompt": "hal');
    const started = Date.now();
    const answer = await req.answer;
    expectBodyTimeout(answer, /no data for 0.5 s/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(400);
    expect(answer.headers.connection).toBe("close");
    await req.closed;
    expect(sim.stats().requests).toBe(before);
  });

  it("a byte every 100 ms (never idle for long): 408 body_timeout for the minimum rate", async () => {
    const req = openRequest(dripRouter.url, "/v1/completions", {
      ...JSON_HEADERS,
      "content-length": 10_000,
    });
    let answered = false;
    void req.answer.finally(() => {
      answered = true;
    });
    await req.write("{");
    const drip = (async () => {
      while (!answered && (await req.write(" "))) await sleep(100);
    })();
    expectBodyTimeout(await req.answer, /slower than 200 bytes\/s/);
    await drip;
    req.socket.destroy();
  });

  it("an endless chunked body at a good rate: 408 body_timeout at the total limit", async () => {
    const req = openRequest(router.url, "/v1/completions", {
      ...JSON_HEADERS,
      "transfer-encoding": "chunked",
    });
    let answered = false;
    void req.answer.finally(() => {
      answered = true;
    });
    await req.write(chunk('{"prompt": "'));
    const started = Date.now();
    const pump = (async () => {
      while (!answered && (await req.write(chunk("x".repeat(512))))) await sleep(20);
    })();
    expectBodyTimeout(await req.answer, /not complete after 1.5 s/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1400);
    await pump;
    req.socket.destroy();
  });

  it("a body that arrives in pieces within the limits is served", async () => {
    const body = JSON.stringify({ prompt: "slow but steady", max_tokens: 1 });
    const req = openRequest(router.url, "/v1/completions", {
      ...JSON_HEADERS,
      "content-length": Buffer.byteLength(body),
    });
    await req.write(body.slice(0, 10));
    await sleep(100);
    await req.write(body.slice(10));
    expect((await req.answer).status).toBe(200);
    req.socket.destroy();
  });

  it("the router keeps serving afterwards", async () => {
    const res = await postJson(`${router.url}/v1/completions`, { prompt: "hi", max_tokens: 1 });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});
