import { describe, expect, it } from "vitest";
import { postJson, startTestRouter } from "../helpers/router.js";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { chunk, openRequest, sleep } from "./raw-client.js";

const LIMIT = 100_000;

/**
 * Sends a whole chunked body of `total` bytes in 4 KB writes a millisecond apart (so the upload
 * is still going on when the router answers), reading nothing until the last byte is written (as
 * many clients do), then reads the answer.
 */
async function uploadThenRead(
  url: string,
  total: number,
  headers: Record<string, string> = {},
): Promise<{ status: number; writesFailed: boolean; error?: string }> {
  const req = openRequest(url, "/v1/completions", {
    "content-type": "application/json",
    "transfer-encoding": "chunked",
    ...headers,
  });
  req.socket.pause();
  let writesFailed = false;
  for (let sent = 0; sent < total && !writesFailed; sent += 4096) {
    writesFailed = !(await req.write(chunk("x".repeat(4096))));
    await sleep(1);
  }
  if (!writesFailed) writesFailed = !(await req.write(chunk("")));
  req.socket.resume();
  try {
    const answer = await req.answer;
    req.socket.destroy();
    return { status: answer.status, writesFailed };
  } catch (err) {
    return { status: 0, writesFailed, error: (err as Error).message };
  }
}

describe("lingering close: an early answer reaches a client still sending (issue 10 item 11)", () => {
  const fixture = simBehindRouter({
    maxPayloadSize: LIMIT,
    bodyLingerSecs: 10,
    bodyLingerBytes: 1_000_000,
  });

  it("a 300 KB chunked upload over a 100 KB limit gets its 413, not a connection reset (5 runs)", async () => {
    for (let run = 0; run < 5; run++) {
      const result = await uploadThenRead(fixture.router.url, 300_000);
      expect(result, `run ${run}`).toEqual({ status: 413, writesFailed: false });
    }
  });

  it("a 401 (wrong key) to a client still uploading is read the same way", async () => {
    const keyed = await startTestRouter({ workerUrls: [fixture.sim.url], apiKey: "secret" });
    try {
      const result = await uploadThenRead(keyed.url, 300_000, { authorization: "Bearer nope" });
      expect(result).toEqual({ status: 401, writesFailed: false });
    } finally {
      await keyed.stop(100);
    }
  });

  it("the connection is cut once the client has sent more than --body-linger-bytes", async () => {
    const req = openRequest(fixture.router.url, "/v1/completions", {
      "content-type": "application/json",
      "transfer-encoding": "chunked",
    });
    let ok = true;
    for (let sent = 0; sent < 5_000_000 && ok; sent += 65536) {
      ok = await req.write(chunk("x".repeat(65536)));
    }
    expect((await req.answer).status).toBe(413);
    await req.closed;
    expect(req.socket.destroyed).toBe(true);
  });

  it("the router keeps serving afterwards", async () => {
    const res = await postJson(`${fixture.router.url}/v1/completions`, {
      prompt: "hi",
      max_tokens: 1,
    });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});
