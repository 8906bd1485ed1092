import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { ERROR_CATALOG, type ErrorCode } from "../../src/errors.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter, waitFor } from "../helpers/router.js";

/**
 * Whatever arrives, the router answers with a status and a JSON body (an OpenAI-shaped catalog
 * error when the router itself refuses), never crashes, and keeps serving valid requests sent
 * at the same time. Seeded, so a failure replays.
 */
const RUNS = 150;
const SEED = 20240607;

const DATA_PLANE = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/generate",
  "/v1/models",
];
const ADMIN = ["/workers", "/workers/0123456789", "/add_worker", "/remove_worker", "/list_workers"];
const OTHER = ["/health", "/readiness", "/metrics", "/", "/v2/chat/completions", "/v1/chat/x"];

const path = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...DATA_PLANE) },
  { weight: 2, arbitrary: fc.constantFrom(...ADMIN) },
  { weight: 1, arbitrary: fc.constantFrom(...OTHER) },
  { weight: 1, arbitrary: fc.webPath().filter((p) => p.startsWith("/")) },
);
const method = fc.oneof(
  { weight: 6, arbitrary: fc.constant("POST") },
  { weight: 1, arbitrary: fc.constantFrom("PUT", "PATCH", "DELETE") },
);
const contentType = fc.oneof(
  { weight: 4, arbitrary: fc.constant("application/json") },
  { weight: 1, arbitrary: fc.constant("application/json; charset=utf-8") },
  { weight: 1, arbitrary: fc.constant(undefined) },
  { weight: 1, arbitrary: fc.stringMatching(/^[a-z]{1,8}\/[a-z+.-]{1,12}$/) },
);
const requestId = fc.option(fc.stringMatching(/^[\x21-\x7e]{0,250}$/), { nil: undefined });

/** Small bodies, and some around the 2048-byte limit. */
const randomBytes = fc
  .oneof(fc.uint8Array({ maxLength: 512 }), fc.uint8Array({ minLength: 1800, maxLength: 3000 }))
  .map((b) => Buffer.from(b));
const randomJson = fc.json({ maxDepth: 4 }).map((s) => Buffer.from(s));
const randomValue = fc
  .anything({ maxDepth: 3, withNullPrototype: true, withObjectString: true })
  .map((v) => Buffer.from(JSON.stringify(v) ?? "null"));
/** Mostly well-formed requests with random field values: they reach the workers. */
const plausibleChat = fc
  .record(
    {
      model: fc.oneof(fc.string(), fc.integer(), fc.constant(null)),
      messages: fc.oneof(
        fc.array(
          fc.record(
            {
              role: fc.oneof(fc.constantFrom("user", "system", "assistant"), fc.string()),
              content: fc.oneof(fc.string(), fc.jsonValue()),
            },
            { requiredKeys: [] },
          ),
          { maxLength: 4 },
        ),
        fc.jsonValue(),
      ),
      max_tokens: fc.oneof(fc.integer({ min: -5, max: 8 }), fc.string(), fc.constant(null)),
      temperature: fc.oneof(fc.double(), fc.string()),
    },
    { requiredKeys: [] },
  )
  .map((o) => Buffer.from(JSON.stringify(o)));

type Answer = { status: number; contentType: string; fromWorker: boolean; body: string };

describe("fuzzing the router's HTTP surface", () => {
  let sims: SimWorker[];
  let router: RunningRouter;

  beforeAll(async () => {
    sims = await Promise.all([1, 2].map((i) => startSimWorker({ id: `fz${i}`, timeScale: 0 })));
    router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      maxPayloadSize: 2048,
    });
  });
  afterAll(async () => {
    await router.stop(100);
    await Promise.all(sims.map((s) => s.close()));
  });

  async function send(
    m: string,
    p: string,
    body: Buffer,
    type: string | undefined,
    id: string | undefined,
  ): Promise<Answer> {
    const headers: Record<string, string> = {};
    if (type !== undefined) headers["content-type"] = type;
    if (id !== undefined) headers["x-request-id"] = id;
    const res = await fetch(`${router.url}${p}`, { method: m, headers, body });
    return {
      status: res.status,
      contentType: res.headers.get("content-type") ?? "",
      fromWorker: res.headers.has("x-radixgate-worker"),
      body: await res.text(),
    };
  }

  async function valid(i: number): Promise<number> {
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: `ok ${i}` }] }),
    });
    const body = (await res.json()) as { object?: string };
    expect(body.object).toBe("chat.completion");
    return res.status;
  }

  function checkAnswer(a: Answer): void {
    expect(a.status).toBeGreaterThanOrEqual(200);
    expect(a.status).toBeLessThan(600);
    if (a.fromWorker && a.contentType.startsWith("text/event-stream")) return;
    // Every answer is JSON (the Prometheus text of GET /metrics is never reached: no GET here).
    const parsed = JSON.parse(a.body) as { error?: { code?: string; type?: string } };
    if (a.status >= 400 && !a.fromWorker) {
      const code = parsed.error?.code as ErrorCode;
      expect(Object.keys(ERROR_CATALOG)).toContain(code);
      // An internal error would be a bug the input found.
      expect(code).not.toBe("internal_error");
      expect(ERROR_CATALOG[code].status).toBe(a.status);
      expect(parsed.error?.type).toBe(ERROR_CATALOG[code].type);
    }
  }

  let counter = 0;
  const property = (body: fc.Arbitrary<Buffer>) =>
    fc.asyncProperty(method, path, body, contentType, requestId, async (m, p, b, type, id) => {
      const [answer, ok] = await Promise.all([send(m, p, b, type, id), valid(counter++)]);
      checkAnswer(answer);
      expect(ok).toBe(200);
    });

  it("random bytes to every endpoint: always a status and a JSON body, valid requests still served", async () => {
    await fc.assert(property(randomBytes), { seed: SEED, numRuns: RUNS });
  });

  it("random JSON documents to every endpoint", async () => {
    await fc.assert(property(randomJson), { seed: SEED + 1, numRuns: RUNS });
  });

  it("random JavaScript values, serialized, to every endpoint", async () => {
    await fc.assert(property(randomValue), { seed: SEED + 2, numRuns: RUNS });
  });

  it("plausible chat requests with random field values reach the workers and come back as JSON", async () => {
    await fc.assert(
      fc.asyncProperty(plausibleChat, async (b) => {
        const [answer, ok] = await Promise.all([
          send("POST", "/v1/chat/completions", b, "application/json", undefined),
          valid(counter++),
        ]);
        checkAnswer(answer);
        expect(ok).toBe(200);
      }),
      { seed: SEED + 3, numRuns: RUNS },
    );
  });

  it("afterwards nothing is left over: no request in flight, both workers registered and healthy", async () => {
    await waitFor(() => router.context.state.active === 0, 2000, "no active request");
    const workers = router.context.registry.list();
    expect(workers).toHaveLength(2);
    for (const w of workers) {
      expect(w.inFlight).toBe(0);
      expect(w.healthy).toBe(true);
      expect(w.breaker.state).toBe("closed");
    }
    expect(await valid(-1)).toBe(200);
  });
});
