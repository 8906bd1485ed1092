import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderChat } from "../../sim/template.js";
import { tokenize } from "../../sim/tokenizer.js";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { saltedKey } from "../../src/index/salted-key.js";
import { TokenizerClient } from "../../src/kv-events/tokenizer-client.js";
import { waitFor } from "../sim/http-helpers.js";

let sim: SimWorker;
let pool: Pool;
const target = () => ({ pool, basePath: "", authorization: undefined });

beforeAll(async () => {
  sim = await startSimWorker({ timeScale: 0 });
  pool = new Pool(sim.url);
});
afterAll(async () => {
  await pool.close();
  await sim.close();
});

const options = { requestTimeoutMs: 5000, maxCachedTokens: 10_000, maxTokens: 100_000 };

describe("TokenizerClient against the simulator's /tokenize", () => {
  it("tokenizes prompts and chat messages as the engine does", async () => {
    const client = new TokenizerClient(options);
    expect(await client.tokenize(target(), "m", { prompt: "hello world\n" })).toEqual(
      tokenize("hello world\n"),
    );
    const messages = [{ role: "user", content: "hi there" }];
    expect(await client.tokenize(target(), "m", { messages })).toEqual(
      tokenize(renderChat(messages)),
    );
  });

  it("reuses a cached line prefix: a longer conversation only sends its new part", async () => {
    const client = new TokenizerClient(options);
    const history = "system: be brief\nuser: first question\n";
    await client.tokenize(target(), "m", { prompt: history });
    const before = sim.stats().endpoints["/tokenize"] ?? 0;
    const longer = `${history}assistant: answer\nuser: second`;
    const tokens = await client.tokenize(target(), "m", { prompt: longer });
    expect(tokens).toEqual(tokenize(longer));
    expect(sim.stats().endpoints["/tokenize"]).toBe(before + 1);
    expect(client.cached("m", { prompt: longer })).toEqual(tokens);
  });

  it("stays within its token bound, dropping the oldest entries", async () => {
    const client = new TokenizerClient({ ...options, maxCachedTokens: 20 });
    await client.tokenize(target(), "m", { prompt: "x".repeat(40) }); // 10 tokens
    await client.tokenize(target(), "m", { prompt: "y".repeat(40) });
    await client.tokenize(target(), "m", { prompt: "z".repeat(40) });
    expect(client.size).toBeLessThanOrEqual(20);
    expect(client.cached("m", { prompt: "x".repeat(40) })).toBeUndefined();
  });

  it("asks the worker once for an input over maxTokens; that note counts against the bound", async () => {
    const client = new TokenizerClient({ ...options, maxCachedTokens: 20, maxTokens: 5 });
    const calls = () => sim.stats().endpoints["/tokenize"] ?? 0;
    const before = calls();
    const x = { prompt: "x".repeat(40) }; // 10 tokens
    expect(await client.tokenize(target(), "m", x)).toBeUndefined();
    expect(await client.tokenize(target(), "m", x)).toBeUndefined();
    expect(client.cached("m", x)).toBeUndefined();
    expect(calls()).toBe(before + 1);
    expect(client.failures).toBe(1);
    // Two more such notes push the first out: asked again.
    await client.tokenize(target(), "m", { prompt: "y".repeat(40) });
    await client.tokenize(target(), "m", { prompt: "z".repeat(40) });
    expect(client.size).toBeLessThanOrEqual(20);
    await client.tokenize(target(), "m", x);
    expect(calls()).toBe(before + 4);
  });

  it("answers undefined (never throws) when the worker refuses or is gone", async () => {
    const client = new TokenizerClient(options);
    expect(await client.tokenize(target(), "m", { messages: "nope" as never })).toBeUndefined();
    const dead = new Pool("http://127.0.0.1:1");
    expect(
      await client.tokenize({ pool: dead, basePath: "", authorization: undefined }, "m", {
        prompt: "a",
      }),
    ).toBeUndefined();
    await dead.close();
    expect(client.failures).toBe(2);
  });

  // Issue 20, item 9: chats were cached whole, so every new turn or new question missed the cache
  // and, with /tokenize slower than the budget, routed as a tie.
  it("a new question after a known system prompt: the system messages' tokens are a known prefix", async () => {
    const client = new TokenizerClient(options);
    const system = { role: "system", content: "You answer in French.\nBe brief." };
    const first = [system, { role: "user", content: "What is a cache?" }];
    await client.tokenize(target(), "m", { messages: first });
    // The system messages are tokenized once on their own, in the background.
    await waitFor(
      () =>
        client.knownPrefix("m", { messages: [system, { role: "user", content: "x" }] }) !==
        undefined,
    );
    const second = [system, { role: "user", content: "And a prefix tree?" }];
    const prefix = client.knownPrefix("m", { messages: second })!;
    expect(prefix.tokens).toEqual(tokenize(renderChat([system], false)));
    const whole = tokenize(renderChat(second));
    expect(whole.slice(0, prefix.tokens.length)).toEqual(prefix.tokens);
    expect(prefix.fraction).toBeGreaterThan(0.3);
    expect(prefix.fraction).toBeLessThan(1);
    expect(client.cached("m", { messages: second })).toBeUndefined();
  });

  it("a follow-up turn: the conversation as last tokenized is a known prefix of the next turn", async () => {
    const client = new TokenizerClient(options);
    const turn1 = [{ role: "user", content: "Name three rivers." }];
    const tokens1 = await client.tokenize(target(), "m", { messages: turn1 });
    const turn2 = [
      ...turn1,
      { role: "assistant", content: "Rhine, Loire, Po." },
      { role: "user", content: "And lakes?" },
    ];
    const prefix = client.knownPrefix("m", { messages: turn2 })!;
    expect(prefix.tokens).toEqual(tokens1);
    expect(tokenize(renderChat(turn2)).slice(0, prefix.tokens.length)).toEqual(tokens1);
    // No system messages: nothing tokenized in the background; another model shares nothing.
    expect(client.knownPrefix("other", { messages: turn2 })).toBeUndefined();
    expect(
      client.knownPrefix("m", { messages: [{ role: "user", content: "Name three lakes." }] }),
    ).toBeUndefined();
  });

  it("a prompt string's known prefix is its longest cached line prefix", async () => {
    const client = new TokenizerClient(options);
    const head = "system: be brief\n";
    await client.tokenize(target(), "m", { prompt: head });
    const prefix = client.knownPrefix("m", { prompt: `${head}user: hello` })!;
    expect(prefix.tokens).toEqual(tokenize(head));
    expect(prefix.fraction).toBeCloseTo(head.length / (head.length + 11));
  });
});

describe("TokenizerClient under tenants' cache salts", () => {
  it("asks the engine for its own model's tokens, and keeps each tenant's cache apart", async () => {
    const asked: unknown[] = [];
    const server = createServer((req, res) => {
      let body = "";
      req.on("data", (c: Buffer) => {
        body += c.toString();
      });
      req.on("end", () => {
        asked.push((JSON.parse(body) as { model?: unknown }).model);
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ tokens: [1, 2, 3], count: 3, max_model_len: 100 }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const engine = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const client = new TokenizerClient(options);
      const at = { pool: engine, basePath: "", authorization: undefined };
      const alice = saltedKey("m", "rg-aaaaaaaaaaaaaaaaaaaaaaaa");
      await client.tokenize(at, alice, { prompt: "hello" });
      await client.tokenize(at, saltedKey(undefined, "rg-aaaaaaaaaaaaaaaaaaaaaaaa"), {
        prompt: "hello",
      });
      expect(asked).toEqual(["m", undefined]);
      // Another tenant's identical prompt is not answered from alice's entry (a faster answer
      // would tell it what she sent).
      expect(
        client.cached(saltedKey("m", "rg-bbbbbbbbbbbbbbbbbbbbbbbb"), { prompt: "hello" }),
      ).toBeUndefined();
      expect(client.cached(alice, { prompt: "hello" })).toEqual([1, 2, 3]);
    } finally {
      await engine.close();
      server.close();
    }
  });
});
