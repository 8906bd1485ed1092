import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { LargeBodyGate } from "../../src/intake/large-body-gate.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";
import { chunk, openRequest, type RawRequest } from "./raw-client.js";

/** A body over LARGE bytes is large; two are read at once. */
const LARGE = 20_000;
const BODY = 60_000;
/** Another loopback address: the uploads' client, as the router sees it. */
const UPLOADER = "127.0.0.2";

/** A completion body of exactly BODY bytes: its first `n` bytes, or the rest after them. */
const FULL = (() => {
  const head = '{"prompt": "';
  const tail = '", "max_tokens": 1}';
  return head + "x".repeat(BODY - head.length - tail.length) + tail;
})();

function upload(router: RunningRouter): RawRequest {
  return openRequest(
    router.url,
    "/v1/completions",
    { "content-type": "application/json", "content-length": BODY },
    UPLOADER,
  );
}

const gateOf = (router: RunningRouter) => router.context.intake.largeBodyGate as LargeBodyGate;

/** Two large uploads under way, holding both turns. */
async function holdBothTurns(router: RunningRouter): Promise<RawRequest[]> {
  const held = [upload(router), upload(router)];
  for (const u of held) await u.write(FULL.slice(0, 1000));
  await waitFor(() => gateOf(router).active === 2, 3000, "two read");
  return held;
}

// Sixteen 60 MB bodies read side by side had every socket's bytes handled in each turn of the
// event loop: legitimate p99 went 127x its quiet value. Large bodies are now read a few at a time,
// the others paused at the socket.
describe("large bodies are read a few at a time", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  /** The same gate, and a large body waits its turn 0.3 s at most. */
  let impatient: RunningRouter;

  beforeAll(async () => {
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    const common = {
      workerUrls: [sim.url],
      largeBodyBytes: LARGE,
      maxLargeBodyReads: 2,
      bodyMinRateBytes: 0,
    };
    // A short idle clock: a body waiting its turn must not be cut by it.
    router = await startTestRouter({ ...common, largeBodyWaitSecs: 30, bodyIdleTimeoutSecs: 1.5 });
    impatient = await startTestRouter({
      ...common,
      largeBodyWaitSecs: 0.3,
      bodyIdleTimeoutSecs: 10,
    });
  });
  afterAll(async () => {
    await Promise.all([router.stop(100), impatient.stop(100)]);
    await sim.close();
  });

  it("the third large body waits paused until one ends; small requests pass meanwhile", async () => {
    const gate = gateOf(router);
    const uploads = [upload(router), upload(router), upload(router)];
    for (const u of uploads) await u.write(FULL.slice(0, 1000));
    await waitFor(() => gate.active === 2 && gate.waiting === 1, 3000, "two read, one waits");
    // The waiting body's bytes were not taken in: only the two read count in the budget.
    await waitFor(() => router.context.bodyBudget.inUse === 2000, 3000, "two bodies counted");

    const small = await postJson(`${router.url}/v1/completions`, { prompt: "hi", max_tokens: 1 });
    expect(small.status).toBe(200);
    await small.arrayBuffer();
    // Longer than the idle clock: the waiting body is not cut for its silence (the two read go on).
    for (let i = 1; i <= 8; i++) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      for (const u of uploads.slice(0, 2)) await u.write(FULL.slice(i * 125 + 875, i * 125 + 1000));
    }
    expect(gate.waiting).toBe(1);

    await uploads[0]!.write(FULL.slice(2000));
    expect((await uploads[0]!.answer).status).toBe(200);
    await waitFor(() => gate.waiting === 0 && gate.active === 2, 3000, "the third's turn");
    for (const u of uploads.slice(1)) await u.write(FULL.slice(u === uploads[1] ? 2000 : 1000));
    for (const u of uploads.slice(1)) expect((await u.answer).status).toBe(200);
    await waitFor(() => gate.active === 0, 3000, "every turn given back");
    for (const u of uploads) u.socket.destroy();
  });

  it("a chunked body waits once it grows large", async () => {
    const gate = gateOf(router);
    const held = await holdBothTurns(router);
    const chunked = openRequest(
      router.url,
      "/v1/completions",
      { "content-type": "application/json", "transfer-encoding": "chunked" },
      UPLOADER,
    );
    await chunked.write(chunk(FULL.slice(0, 1000)));
    await waitFor(() => router.context.bodyBudget.inUse === 3000, 3000, "small so far: read");
    expect(gate.waiting).toBe(0);
    await chunked.write(chunk(FULL.slice(1000, LARGE + 1000)));
    await waitFor(() => gate.waiting === 1, 3000, "large now: waits");
    await held[0]!.write(FULL.slice(1000));
    expect((await held[0]!.answer).status).toBe(200);
    await waitFor(() => gate.waiting === 0, 3000, "its turn");
    await chunked.write(Buffer.concat([chunk(FULL.slice(LARGE + 1000)), chunk("")]));
    expect((await chunked.answer).status).toBe(200);
    held[1]!.socket.destroy();
    await waitFor(() => gate.active === 0, 3000, "every turn given back");
    for (const u of [...held, chunked]) u.socket.destroy();
  });

  it("a body that waits too long gets 503 large_body_busy with Retry-After, and leaves the line", async () => {
    const gate = gateOf(impatient);
    const held = await holdBothTurns(impatient);
    const late = upload(impatient);
    await late.write(FULL.slice(0, 1000));
    const answer = await late.answer;
    expect(answer.status).toBe(503);
    expect(answer.headers["retry-after"]).toBeDefined();
    expect((JSON.parse(answer.body) as { error: { code: string } }).error.code).toBe(
      "large_body_busy",
    );
    expect(gate.waiting).toBe(0);
    for (const u of held) u.socket.destroy();
    await waitFor(() => gate.active === 0, 3000, "turns given back when their clients leave");
    late.socket.destroy();
  });

  it("a client that hangs up while it waits leaves the line; its turn goes to no one", async () => {
    const gate = gateOf(router);
    const held = await holdBothTurns(router);
    const gone = upload(router);
    await gone.write(FULL.slice(0, 1000));
    await waitFor(() => gate.waiting === 1, 3000, "waits");
    gone.socket.destroy();
    await waitFor(() => gate.waiting === 0, 3000, "the hang-up seen while paused");
    held[0]!.socket.destroy();
    await waitFor(() => gate.active === 1, 3000, "one turn left, none handed to the gone client");
    held[1]!.socket.destroy();
    await waitFor(() => gate.active === 0, 3000, "every turn given back");
  });
});
