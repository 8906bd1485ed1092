import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { RouterError } from "../../src/errors.js";
import { BodyBudget } from "../../src/intake/body-budget.js";
import { Intake, type IntakeOptions } from "../../src/intake/intake.js";
import type { Endpoint } from "../../src/intake/routing-text.js";
import type { ServingWorker } from "../../src/workers/served-models.js";

const OPTIONS: IntakeOptions = {
  body: { maxBytes: 1 << 20, totalTimeoutMs: 5_000, idleTimeoutMs: 5_000, minBytesPerSec: 0 },
  parseOffloadBytes: 1 << 20,
  maxRoutingTextChars: 100_000,
  withTokenizeInput: true,
  sessionAffinity: "off",
  sessionHeader: "x-session-id",
  modelRouting: "engine",
};

/** An incoming request carrying `body` as JSON (the stream readBody reads). */
function request(body: unknown, headers: IncomingHttpHeaders = {}): IncomingMessage {
  const bytes = Buffer.from(JSON.stringify(body));
  const stream = new PassThrough();
  Object.assign(stream, {
    headers: {
      "content-type": "application/json",
      "content-length": String(bytes.length),
      ...headers,
    },
  });
  stream.end(bytes);
  return stream as unknown as IncomingMessage;
}

function vllm(...models: string[]): ServingWorker {
  return { servedModels: new Set(models), engine: "vllm" };
}

async function take(
  endpoint: Endpoint,
  body: unknown,
  {
    headers = {},
    options = {},
    workers = [vllm("llama")],
  }: {
    headers?: IncomingHttpHeaders;
    options?: Partial<IntakeOptions>;
    workers?: ServingWorker[];
  } = {},
) {
  const intake = new Intake({ ...OPTIONS, ...options }, { list: () => workers });
  const lease = new BodyBudget(0).lease();
  try {
    return await intake.take(request(body, headers), endpoint, lease);
  } finally {
    lease.release();
  }
}

describe("Intake: one HTTP request in, its RoutingRequest out", () => {
  it("chat: the messages' text, the model, stream, the tokenize input and the body as sent", async () => {
    const messages = [{ role: "user", content: "Hello there" }];
    const body = { model: "llama", messages, stream: true };
    const routing = await take("chat", body);
    expect(routing).toMatchObject({
      endpoint: "chat",
      requested: "llama",
      // One model served under its one name: the shared default key.
      model: undefined,
      adapter: undefined,
      session: undefined,
      stream: true,
      usageDescribesText: true,
      tokenizeInput: { messages },
    });
    expect(routing.text).toContain("Hello there");
    expect(routing.plan.route).toBe("listed");
    expect(routing.body?.toString()).toBe(JSON.stringify(body));
  });

  it("completions: the prompt is the text; a model among several a worker serves is its own index key", async () => {
    const routing = await take(
      "completions",
      { model: "llama", prompt: "Once upon a time" },
      { workers: [vllm("llama", "qwen")] },
    );
    expect(routing).toMatchObject({
      endpoint: "completions",
      text: "Once upon a time",
      requested: "llama",
      model: "llama",
      stream: false,
      tokenizeInput: { prompt: "Once upon a time" },
    });
  });

  it("/generate with lora_path: the adapter is the index key (SGLang's lora_path)", async () => {
    const routing = await take(
      "generate",
      { text: "SELECT * FROM", lora_path: "sql-lora" },
      { workers: [{ servedModels: new Set(["base"]), engine: "sglang" }] },
    );
    expect(routing).toMatchObject({
      endpoint: "generate",
      text: "SELECT * FROM",
      requested: undefined,
      adapter: "sql-lora",
      model: "sql-lora",
      tokenizeInput: { prompt: "SELECT * FROM" },
    });
    expect(routing.plan.route).toBe("unnamed");
  });

  it("a session header (--session-affinity header) becomes the session key; absent otherwise", async () => {
    const headers = { "x-session-id": "conversation-7" };
    const body = { model: "llama", prompt: "hi", user: "alice" };
    const byHeader = await take("completions", body, {
      headers,
      options: { sessionAffinity: "header" },
    });
    expect(byHeader.session).toBe("conversation-7");
    const byUser = await take("completions", body, {
      headers,
      options: { sessionAffinity: "user" },
    });
    expect(byUser.session).toBe("alice");
    const off = await take("completions", body, { headers });
    expect(off.session).toBeUndefined();
  });

  it("no tokenize input without --kv-events", async () => {
    const routing = await take(
      "completions",
      { prompt: "Once" },
      { options: { withTokenizeInput: false } },
    );
    expect(routing.tokenizeInput).toBeUndefined();
  });

  it("works out what a PD pair needs of the body only when pairs are on, in the same parse", async () => {
    const body = { messages: [{ role: "user", content: "Once" }], n: 2, bootstrap_room: 7 };
    const kept = await take("chat", body, { options: { pairs: "sglang" } });
    expect(kept.pair?.batch).toBe(2);
    // The client's own bootstrap field is left out of the body the router's are spliced into.
    const { bootstrap_room: _room, ...rest } = body;
    expect(JSON.parse(Buffer.from(kept.pair?.base ?? []).toString())).toEqual(rest);
    const none = await take("chat", body);
    expect(none.pair).toBeUndefined();
  });

  it("a model no worker serves and none accepts: the plan says not_found (the forwarder's 404)", async () => {
    const routing = await take("completions", { model: "gpt-9", prompt: "x" });
    expect(routing.plan.route).toBe("not_found");
  });

  it("the GET info routes read no body: empty text, every worker", async () => {
    const intake = new Intake(OPTIONS, { list: () => [vllm("llama")] });
    const lease = new BodyBudget(0).lease();
    const received = await intake.receive(request({}), "models", lease);
    const routing = intake.route(received);
    expect(routing).toMatchObject({ endpoint: "models", body: undefined, text: "", stream: false });
    expect(routing.plan.route).toBe("unnamed");
  });

  it("route() reads the fleet when the request goes, not when its body arrived (admission's wait)", async () => {
    const workers = [vllm("llama")];
    const intake = new Intake(OPTIONS, { list: () => workers });
    const lease = new BodyBudget(0).lease();
    const received = await intake.receive(
      request({ model: "qwen", prompt: "x" }),
      "completions",
      lease,
    );
    expect(intake.route(received).plan.route).toBe("not_found");
    // A worker serving qwen joins while the request waits for admission.
    workers.push(vllm("qwen"));
    expect(intake.route(received).plan.route).toBe("listed");
  });

  it("refuses what the body rules refuse, with the router's errors", async () => {
    await expect(
      take("completions", { prompt: "x" }, { headers: { "content-type": "text/plain" } }),
    ).rejects.toMatchObject({ code: "unsupported_media_type" });
    await expect(
      take(
        "completions",
        { prompt: "x".repeat(100) },
        { options: { body: { ...OPTIONS.body, maxBytes: 10 } } },
      ),
    ).rejects.toBeInstanceOf(RouterError);
    await expect(take("completions", [1, 2])).rejects.toMatchObject({ code: "invalid_request" });
  });
});
