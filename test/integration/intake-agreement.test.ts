import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RoutingRequest } from "../../src/proxy/routing-request.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/** What can be compared of a RoutingRequest: the plan by its route (its checks are closures). */
function comparable(routing: RoutingRequest) {
  return { ...routing, plan: routing.plan.route };
}

describe("/debug/route and the data plane route the same RoutingRequest (intake/)", () => {
  let sims: SimWorker[];
  let router: RunningRouter;
  const seen: RoutingRequest[] = [];

  beforeAll(async () => {
    sims = await Promise.all(
      ["a", "b"].map((id) =>
        startSimWorker({ id, timeScale: 0, model: "llama", loraAdapters: ["sql-lora"] }),
      ),
    );
    router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      sessionAffinity: "header",
      sessionHeader: "x-session-id",
    });
    // Every RoutingRequest the router builds, whichever route asked for it.
    const { intake } = router.context;
    const route = intake.route.bind(intake);
    intake.route = (received) => {
      const routing = route(received);
      seen.push(routing);
      return routing;
    };
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  const cases = [
    {
      path: "/v1/chat/completions",
      body: {
        model: "llama",
        messages: [{ role: "user", content: "Summarize the billing policy." }],
        stream: true,
        max_tokens: 2,
      },
      expected: { requested: "llama", stream: true },
    },
    {
      path: "/v1/completions",
      body: { model: "llama", prompt: "Once upon a time", max_tokens: 2 },
      expected: { requested: "llama", text: "Once upon a time", stream: false },
    },
    {
      path: "/generate",
      body: { text: "SELECT * FROM", lora_path: "sql-lora" },
      // SGLang's lora_path: the adapter keys the index.
      expected: { text: "SELECT * FROM", adapter: "sql-lora", model: "sql-lora" },
    },
  ];

  for (const { path, body, expected } of cases) {
    it(`${path}: the same fields from either route`, async () => {
      const headers = { "x-session-id": `conversation of ${path}` };
      seen.length = 0;
      const explained = await postJson(`${router.url}/debug/route${path}`, body, headers);
      expect(explained.status).toBe(200);
      const explanation = (await explained.json()) as { routing_text_chars: number };
      const sent = await postJson(`${router.url}${path}`, body, headers);
      expect(sent.status).toBe(200);
      await sent.arrayBuffer();

      expect(seen).toHaveLength(2);
      const [dryRun, forwarded] = seen as [RoutingRequest, RoutingRequest];
      expect(comparable(forwarded)).toEqual(comparable(dryRun));
      expect(dryRun).toMatchObject(expected);
      expect(dryRun.session).toBe(headers["x-session-id"]);
      expect(dryRun.body?.toString()).toBe(JSON.stringify(body));
      expect(explanation.routing_text_chars).toBe(dryRun.text.length);
    });
  }
});
