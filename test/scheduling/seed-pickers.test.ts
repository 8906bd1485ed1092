import { describe, expect, it } from "vitest";
import { AibrixPrefixPicker } from "../../src/scheduling/aibrix-picker.js";
import { ChwblPicker, chwblKey } from "../../src/scheduling/key-pickers.js";
import type { Pick } from "../../src/scheduling/plugin.js";
import { context, worker } from "./helpers.js";

const aibrix = () =>
  new AibrixPrefixPicker("aibrix", { imbalanceAbsCount: 8, stdDevFactor: 1, blockChars: 128 });
const pick = (p: { pick: (...a: never[]) => Pick | -1 }, ...args: unknown[]) =>
  (p.pick as (...a: unknown[]) => Pick | -1)(...args) as Pick;
const none = new Float64Array(16);

describe("aibrix-prefix-picker (AIBrix prefix_cache.go)", () => {
  const text = "p".repeat(1024); // 8 blocks of 128

  it("switches to the least running pod when max − min running exceeds 8", () => {
    const ws = [0, 3, 9].map((n, i) => worker(`w${i}`, { inFlight: n }));
    // w2 holds the whole prompt, but the fleet is imbalanced (9 − 0 > 8).
    const decision = pick(aibrix(), context(ws, { text, matched: [0, 0, 1024] }), none);
    expect(decision).toEqual({ index: 0, branch: "imbalanced" });
    // At exactly 8 it is not imbalanced: prefix matching decides.
    ws[2]!.inFlight = 8;
    const at8 = pick(aibrix(), context(ws, { text, matched: [0, 0, 1024] }), none);
    expect(at8.branch).not.toBe("imbalanced");
  });

  it("skips a matching pod whose running count is not below mean + k·σ", () => {
    // Running 0, 0, 6: mean 2, σ = √8 ≈ 2.83, bound ≈ 4.83. w2 matches best but is over it.
    const ws = [0, 0, 6].map((n, i) => worker(`w${i}`, { inFlight: n }));
    const decision = pick(aibrix(), context(ws, { text, matched: [256, 0, 1024] }), none);
    expect(decision).toEqual({ index: 0, branch: "prefix_match" });
  });

  it("orders matches by match% then by fewer running requests", () => {
    // Running 1, 0, 0, 2: mean 0.75, σ ≈ 0.83, bound ≈ 1.58 (w0 is under it, w3 is not).
    const ws = [1, 0, 0, 2].map((n, i) => worker(`w${i}`, { inFlight: n }));
    const byMatch = pick(aibrix(), context(ws, { text, matched: [1024, 512, 512, 0] }), none);
    expect(byMatch.index).toBe(0);
    const byLoad = pick(aibrix(), context(ws, { text, matched: [512, 512, 0, 0] }), none);
    expect(byLoad.index).toBe(1);
  });

  it("counts whole blocks only: a match shorter than a block is no match (least running)", () => {
    const ws = [3, 1].map((n, i) => worker(`w${i}`, { inFlight: n }));
    const decision = pick(aibrix(), context(ws, { text, matched: [127, 0] }), none);
    expect(decision).toEqual({ index: 1, branch: "least_request" });
  });

  it("takes the least running pod when every matching pod is over the bound", () => {
    const ws = [5, 5, 5, 0].map((n, i) => worker(`w${i}`, { inFlight: n }));
    // mean 3.75, σ ≈ 2.17, bound ≈ 5.92: all pass; raise the matcher above it.
    ws[0]!.inFlight = 8;
    const decision = pick(aibrix(), context(ws, { text, matched: [1024, 0, 0, 0] }), none);
    expect(decision).toEqual({ index: 3, branch: "least_request" });
  });
});

describe("chwbl-picker (KubeAI balance_chwbl.go)", () => {
  const options = { prefixChars: 100, replication: 256, loadFactor: 1.25 };

  it("keys on the first 100 characters of the first user message, plus the adapter", () => {
    const text = `<system>You are helpful.\n<user>${"q".repeat(150)}\n<assistant>hi\n<user>next\n`;
    expect(chwblKey(text, undefined, options)).toBe("q".repeat(100));
    expect(chwblKey("<user>short\n<assistant>x", "lora1", options)).toBe("shortlora1");
    expect(chwblKey("a plain prompt", undefined, options)).toBe("a plain prompt");
  });

  it("sends one key to one endpoint while loads are within the bound", () => {
    const ws = [0, 1, 2, 3].map((i) => worker(`w${i}`));
    const picker = new ChwblPicker("c", options);
    const text = "<user>the same question\n";
    const first = pick(picker, context(ws, { text }), none);
    expect(first.branch).toBe("ring_home");
    for (let i = 0; i < 5; i++)
      expect(pick(picker, context(ws, { text }), none).index).toBe(first.index);
  });

  it("walks clockwise past an endpoint over its bound", () => {
    const ws = [0, 1, 2, 3].map((i) => worker(`w${i}`));
    const picker = new ChwblPicker("c", options);
    const text = "<user>a hot prefix\n";
    const home = pick(picker, context(ws, { text }), none).index;
    // Home holds 4 of 4 in flight: bound 1.25 × (4 + 1) / 4 = 1.5625; home's 4 + 1 is over it.
    ws[home]!.inFlight = 4;
    const walked = pick(picker, context(ws, { text }), none);
    expect(walked.branch).toBe("ring_walk");
    expect(walked.index).not.toBe(home);
    // The walk is deterministic: the next endpoint clockwise, every time.
    expect(pick(picker, context(ws, { text }), none).index).toBe(walked.index);
  });

  it("takes the first endpoint serving the adapter when all are over the bound", () => {
    const ws = [0, 1, 2].map((i) =>
      worker(`w${i}`, {
        inFlight: 10,
        servedModels: new Set(i === 2 ? ["base", "lora"] : ["base"]),
      }),
    );
    ws[0]!.inFlight = 0;
    // w0 is under the bound but does not serve the adapter; w2 serves it but is over the bound.
    const decision = pick(
      new ChwblPicker("c", options),
      context(ws, { text: "x", adapter: "lora" }),
      none,
    );
    expect(decision).toEqual({ index: 2, branch: "ring_default" });
  });

  it("decides alike whether its rings are kept or built afresh, as candidate lists alternate", () => {
    const all = [0, 1, 2, 3, 4].map((i) => worker(`w${i}`));
    const lists = [all, all.slice(1), [all[0]!, all[2]!, all[4]!], all.slice(0, 3), all.slice(2)];
    const kept = new ChwblPicker("c", options);
    for (let i = 0; i < 60; i++) {
      const ws = lists[i % lists.length]!;
      const text = `<user>question ${i % 7}\n`;
      const fresh = pick(new ChwblPicker("c", options), context(ws, { text }), none);
      expect(pick(kept, context(ws, { text }), none)).toEqual(fresh);
    }
  });

  it("spreads different keys over every endpoint", () => {
    const ws = [0, 1, 2, 3].map((i) => worker(`w${i}`));
    const picker = new ChwblPicker("c", options);
    const seen = new Set<number>();
    for (let i = 0; i < 200; i++)
      seen.add(pick(picker, context(ws, { text: `<user>q${i}\n` }), none).index);
    expect(seen.size).toBe(4);
  });
});
