import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ApproximateIndex, modelKey } from "../../src/index/approximate-index.js";

function matched(index: ApproximateIndex, text: string, model: string | undefined, id = "w") {
  const out: number[] = [];
  index.match(text, model, [{ id }], out);
  return out[0];
}

describe("ApproximateIndex per model", () => {
  it("keeps each model's texts apart: a prefix routed for one model is no hit for another", () => {
    const index = new ApproximateIndex();
    index.addWorker("w");
    index.insert("w", "sql-lora", "You are a SQL expert. Question one");
    expect(matched(index, "You are a SQL expert. Question two", "sql-lora")).toBe(
      "You are a SQL expert. Question ".length,
    );
    expect(matched(index, "You are a SQL expert. Question two", "chat-lora")).toBe(0);
    expect(matched(index, "You are a SQL expert. Question two", undefined)).toBe(0);
  });

  it("stores texts without a model exactly as before (no key)", () => {
    const index = new ApproximateIndex();
    index.addWorker("w");
    index.insert("w", undefined, "plain text");
    expect(index.size("w")).toBe("plain text".length);
    expect(index.treeOf("w")!.match("plain text")).toBe("plain text".length);
  });

  it("truncates within the model's branch only", () => {
    const index = new ApproximateIndex();
    index.addWorker("w");
    index.insert("w", "a", "shared system prompt, user one");
    index.insert("w", "b", "shared system prompt, user one");
    index.truncate("w", "a", "shared system prompt, user one", 7);
    expect(matched(index, "shared system prompt, user one", "a")).toBe(7);
    expect(matched(index, "shared system prompt, user one", "b")).toBe(
      "shared system prompt, user one".length,
    );
  });

  it("shares one budget in one LRU order across a worker's models", () => {
    const index = new ApproximateIndex({ maxTreeSize: 100 });
    index.addWorker("w");
    index.insert("w", "old", "x".repeat(60));
    index.insert("w", "new", "y".repeat(60));
    index.setBudget("w", 80);
    // The least recently used model's text went first.
    expect(matched(index, "x".repeat(60), "old")).toBe(0);
    expect(matched(index, "y".repeat(60), "new")).toBe(60);
    expect(index.size("w")).toBeLessThanOrEqual(80);
  });

  it("model keys are prefix-free: no model's key starts another's", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        fc.pre(a !== b);
        expect(modelKey(a).startsWith(modelKey(b))).toBe(false);
      }),
    );
  });

  it("matches what a per-model reference map would say (property)", () => {
    const models = ["m1", "m2", undefined] as const;
    const op = fc.record({
      model: fc.constantFrom(...models),
      text: fc.stringMatching(/^[ab]{0,12}$/),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), op, (inserts, query) => {
        const index = new ApproximateIndex();
        index.addWorker("w");
        const reference = new Map<string | undefined, string[]>();
        for (const { model, text } of inserts) {
          index.insert("w", model, text);
          reference.set(model, [...(reference.get(model) ?? []), text]);
        }
        let best = 0;
        for (const text of reference.get(query.model) ?? []) {
          let k = 0;
          while (k < text.length && k < query.text.length && text[k] === query.text[k]) k++;
          best = Math.max(best, k);
        }
        // Plain (model-less) texts cannot start with NUL here, so keyed branches never match them.
        expect(matched(index, query.text, query.model)).toBe(best);
      }),
    );
  });
});
