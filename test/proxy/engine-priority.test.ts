import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  bodyWithPriority as bodyWithSent,
  enginePriority,
  prioritySent,
} from "../../src/proxy/engine-priority.js";

/** The body the forwarder sends: prioritySent's answer (its once-per-attempt search) put in. */
function bodyWithPriority(
  body: Buffer,
  path: string,
  engine: string | undefined,
  priority: number | undefined,
): Buffer | undefined {
  return bodyWithSent(body, engine, prioritySent(body, path, engine, priority));
}

describe("passing the request's priority to the engine (--engine-priority)", () => {
  it("maps higher-first to each engine's convention (vLLM lower first, SGLang higher first)", () => {
    expect(enginePriority("vllm", 10)).toBe(-10);
    expect(enginePriority("vllm", -5)).toBe(5);
    expect(enginePriority("vllm", 0)).toBe(0);
    expect(enginePriority("sglang", 10)).toBe(10);
    expect(enginePriority(undefined, 10)).toBeUndefined();
  });

  it("adds the field on the routes each engine reads it on, and only there", () => {
    const body = Buffer.from('{"model":"m"}');
    expect(bodyWithPriority(body, "/v1/chat/completions", "vllm", 7)?.toString()).toBe(
      '{"priority":-7,"model":"m"}',
    );
    expect(bodyWithPriority(body, "/v1/completions?x=1", "sglang", 7)?.toString()).toBe(
      '{"priority":7,"model":"m"}',
    );
    expect(bodyWithPriority(body, "/generate", "sglang", 7)?.toString()).toBe(
      '{"priority":7,"model":"m"}',
    );
    expect(bodyWithPriority(body, "/generate", "vllm", 7)).toBe(body);
    expect(bodyWithPriority(body, "/v1/embeddings", "sglang", 7)).toBe(body);
    expect(bodyWithPriority(body, "/v1/completions", undefined, 7)).toBe(body);
    expect(bodyWithPriority(body, "/v1/completions", "constructor", 7)).toBe(body);
    expect(bodyWithPriority(body, "/v1/completions", "vllm", undefined)).toBe(body);
  });

  it("leaves a priority the client set alone", () => {
    const body = Buffer.from('{"priority":3,"model":"m"}');
    expect(bodyWithPriority(body, "/v1/completions", "vllm", 7)).toBe(body);
  });

  it("property: any JSON object without a priority keeps its fields and gains the mapped one", () => {
    fc.assert(
      fc.property(
        fc.dictionary(
          fc.string().filter((k) => !k.includes("priority") && k !== "__proto__"),
          fc.jsonValue().filter((v) => !JSON.stringify(v).includes('"priority"')),
        ),
        fc.integer({ min: -100, max: 100 }),
        (object, priority) => {
          const text = JSON.stringify(object);
          const out = bodyWithPriority(Buffer.from(text), "/v1/completions", "vllm", priority);
          // The object as its JSON text carries it (JSON has no -0: fast-check's -0 reads back 0).
          const sent = JSON.parse(text);
          expect(JSON.parse(out!.toString())).toEqual({ priority: -priority || 0, ...sent });
        },
      ),
    );
  });
});
