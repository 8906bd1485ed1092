import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/**
 * The Responses API through the router with the official client: the engines keep responses in
 * their own memory, so a second turn naming previous_response_id must reach the worker that
 * produced the first, among 4.
 */
describe("openai client's responses.create across 4 workers", () => {
  let sims: SimWorker[];
  let router: RunningRouter;
  let client: OpenAI;

  beforeAll(async () => {
    sims = await Promise.all(
      ["r1", "r2", "r3", "r4"].map((id) => startSimWorker({ id, timeScale: 0 })),
    );
    // round_robin: without the holder rule, the second turn would go to another worker.
    router = await startTestRouter({ workerUrls: sims.map((s) => s.url), policy: "round_robin" });
    client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  it("a second turn with previous_response_id goes to the worker holding the first", async () => {
    for (let conversation = 0; conversation < 4; conversation++) {
      const first = await client.responses
        .create({
          model: "default",
          input: `Conversation ${conversation}: tell me a story.`,
          max_output_tokens: 4,
        })
        .withResponse();
      expect(first.data.object).toBe("response");
      expect(first.data.output_text.length).toBeGreaterThan(0);
      const holder = first.response.headers.get("x-sim-worker-id");
      for (let turn = 0; turn < 3; turn++) {
        const next = await client.responses
          .create({
            model: "default",
            input: "And then?",
            previous_response_id: first.data.id,
            max_output_tokens: 4,
          })
          .withResponse();
        expect(next.response.status).toBe(200);
        expect(next.response.headers.get("x-sim-worker-id")).toBe(holder);
        expect(next.data.previous_response_id).toBe(first.data.id);
      }
    }
  });

  it("a streamed response is remembered too, and continued on its worker", async () => {
    const stream = await client.responses.create({
      model: "default",
      input: "Stream me something.",
      max_output_tokens: 4,
      stream: true,
    });
    let id: string | undefined;
    let text = "";
    for await (const event of stream) {
      if (event.type === "response.created") id = event.response.id;
      if (event.type === "response.output_text.delta") text += event.delta;
    }
    expect(id).toMatch(/^resp_/);
    expect(text.length).toBeGreaterThan(0);
    const holder = sims.find((s) => id?.includes(s.id))?.id;
    for (let turn = 0; turn < 4; turn++) {
      const next = await client.responses
        .create({
          model: "default",
          input: "More.",
          previous_response_id: id,
          max_output_tokens: 2,
        })
        .withResponse();
      expect(next.response.headers.get("x-sim-worker-id")).toBe(holder);
    }
  });

  it("an id the router never relayed is routed like any request; the engine that lacks it answers 404", async () => {
    await expect(
      client.responses.create({
        model: "default",
        input: "x",
        previous_response_id: "resp_unknown",
        max_output_tokens: 2,
      }),
    ).rejects.toMatchObject({ status: 404 });
  });
});

describe("previous_response_id whose worker has left", () => {
  it("is answered 404 as the engine answers an id it does not hold", async () => {
    const sims = await Promise.all(["g1", "g2"].map((id) => startSimWorker({ id, timeScale: 0 })));
    const router = await startTestRouter({ workerUrls: sims.map((s) => s.url) });
    try {
      const first = await postJson(`${router.url}/v1/responses`, {
        model: "default",
        input: "Hello",
        max_output_tokens: 2,
      });
      const body = (await first.json()) as { id: string };
      const holder = router.context.registry
        .list()
        .find(
          (w) => w.url === sims.find((s) => s.id === first.headers.get("x-sim-worker-id"))?.url,
        );
      expect(holder).toBeDefined();
      router.context.membership.remove(holder?.id as string, "admin");
      const next = await postJson(`${router.url}/v1/responses`, {
        model: "default",
        input: "Again",
        previous_response_id: body.id,
      });
      expect(next.status).toBe(404);
      const error = (await next.json()) as { error: { message: string; type: string } };
      expect(error.error.message).toBe(`Response with id '${body.id}' not found.`);
      expect(error.error.type).toBe("invalid_request_error");
    } finally {
      await router.stop(100);
      await Promise.all(sims.map((s) => s.close()));
    }
  });
});
