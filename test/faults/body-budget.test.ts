import { describe, expect, it } from "vitest";
import { configWith, validateConfig } from "../../src/config.js";
import { ConfigError } from "../../src/errors.js";
import { postJson, waitFor } from "../helpers/router.js";
import { simBehindRouter } from "../helpers/sim-behind-router.js";
import { chunk, openRequest } from "./raw-client.js";

const PAYLOAD = 10_000;
const BUDGET = 20_000;
const JSON_HEADERS = { "content-type": "application/json" };

/** A completions body of exactly `bytes` bytes. */
function bodyOf(bytes: number): string {
  const empty = JSON.stringify({ prompt: "", max_tokens: 1 });
  return JSON.stringify({ prompt: "p".repeat(bytes - empty.length), max_tokens: 1 });
}

describe("buffered request bodies share one memory budget (issue 10 item 2)", () => {
  const fixture = simBehindRouter({
    maxPayloadSize: PAYLOAD,
    maxBodyBufferBytes: BUDGET,
    maxBodyBufferBytesPerClient: 0,
  });

  it("bodies beyond the budget get 503 body_buffer_full with Retry-After; freed budget is reused", async () => {
    const body = bodyOf(PAYLOAD);
    // Two uploads in progress hold nearly the whole budget with the bytes they sent.
    const holders = [0, 1].map(() =>
      openRequest(fixture.router.url, "/v1/completions", {
        ...JSON_HEADERS,
        "content-length": PAYLOAD,
      }),
    );
    for (const h of holders) await h.write(body.slice(0, PAYLOAD - 100));
    await waitFor(
      () => fixture.router.context.bodyBudget.inUse === 2 * (PAYLOAD - 100),
      3000,
      "budget held",
    );

    const before = fixture.sim.stats().requests;
    const refused = await postJson(`${fixture.router.url}/v1/completions`, bodyOf(1000));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("1");
    const error = ((await refused.json()) as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("body_buffer_full");
    expect(error.message).toContain("--max-body-buffer-bytes");
    expect(fixture.sim.stats().requests).toBe(before);

    // A chunked body (no Content-Length) is refused as soon as it does not fit.
    const chunked = openRequest(fixture.router.url, "/v1/completions", {
      ...JSON_HEADERS,
      "transfer-encoding": "chunked",
    });
    await chunked.write(chunk("x".repeat(500)));
    expect((await chunked.answer).status).toBe(503);
    chunked.socket.destroy();

    // One holder finishes: its request ends, its bytes go back to the budget.
    await holders[0]!.write(body.slice(PAYLOAD - 100));
    expect((await holders[0]!.answer).status).toBe(200);
    await waitFor(
      () => fixture.router.context.bodyBudget.inUse === PAYLOAD - 100,
      3000,
      "budget freed",
    );
    const accepted = await postJson(`${fixture.router.url}/v1/completions`, bodyOf(1000));
    expect(accepted.status).toBe(200);
    await accepted.arrayBuffer();

    for (const h of holders) h.socket.destroy();
    await waitFor(() => fixture.router.context.bodyBudget.inUse === 0, 3000, "budget empty");
  });

  it("a client that leaves mid-upload gives its share back", async () => {
    const req = openRequest(fixture.router.url, "/v1/completions", {
      ...JSON_HEADERS,
      "content-length": PAYLOAD,
    });
    await req.write(bodyOf(PAYLOAD).slice(0, PAYLOAD / 2));
    await waitFor(() => fixture.router.context.bodyBudget.inUse === PAYLOAD / 2, 3000, "held");
    req.socket.destroy();
    await waitFor(() => fixture.router.context.bodyBudget.inUse === 0, 3000, "released");
  });

  it("a budget smaller than one maximal body is refused at start-up", () => {
    expect(() =>
      validateConfig(configWith({ maxPayloadSize: 1000, maxBodyBufferBytes: 999 })),
    ).toThrow(ConfigError);
    expect(() =>
      validateConfig(configWith({ maxPayloadSize: 1000, maxBodyBufferBytes: 0 })),
    ).not.toThrow();
  });
});
