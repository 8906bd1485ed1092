import { describe, expect, it } from "vitest";
import { generatedText } from "../../sim/output-text.js";
import { mulberry32, shuffleInPlace } from "../../sim/prng.js";
import { countTokens, tokenize } from "../../sim/tokenizer.js";
import {
  closedLoop,
  generatedSharedPrefix,
  hotPrefix,
  multiTurnChat,
  noSharing,
  openAiBody,
  poissonArrivals,
  promptTextOf,
  type RequestSpec,
  randomText,
} from "../../sim/workloads.js";

function sharedPrefixLength(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

describe("prng", () => {
  it("mulberry32 repeats for a seed and differs across seeds", () => {
    const a = mulberry32(1);
    const b = mulberry32(1);
    const c = mulberry32(2);
    const xs = Array.from({ length: 5 }, () => a());
    expect(Array.from({ length: 5 }, () => b())).toEqual(xs);
    expect(Array.from({ length: 5 }, () => c())).not.toEqual(xs);
    for (const x of xs) expect(x >= 0 && x < 1).toBe(true);
  });

  it("shuffles deterministically and keeps every element", () => {
    const s = shuffleInPlace(mulberry32(3), [...Array(50).keys()]);
    expect(shuffleInPlace(mulberry32(3), [...Array(50).keys()])).toEqual(s);
    expect([...s].sort((x, y) => x - y)).toEqual([...Array(50).keys()]);
    expect(s).not.toEqual([...Array(50).keys()]);
  });
});

describe("randomText", () => {
  it("is exactly four characters per token of the stand-in tokenizer", () => {
    const t = randomText(mulberry32(5), 123);
    expect(t).toHaveLength(492);
    expect(countTokens(t)).toBe(123);
  });
});

describe("generatedSharedPrefix", () => {
  const opts = {
    groups: 4,
    promptsPerGroup: 5,
    systemPromptTokens: 64,
    questionTokens: 8,
    outputTokens: 16,
    seed: 1,
  };

  it("is deterministic per seed and differs across seeds", () => {
    expect(generatedSharedPrefix(opts)).toEqual(generatedSharedPrefix(opts));
    const other = generatedSharedPrefix({ ...opts, seed: 2 });
    expect(other.map((s) => s.prompt)).not.toEqual(
      generatedSharedPrefix(opts).map((s) => s.prompt),
    );
  });

  it("has groups × promptsPerGroup requests sharing one system prompt per group", () => {
    const specs = generatedSharedPrefix(opts);
    expect(specs).toHaveLength(20);
    const byGroup = new Map<number, RequestSpec[]>();
    for (const s of specs)
      byGroup.set(s.group as number, [...(byGroup.get(s.group as number) ?? []), s]);
    expect(byGroup.size).toBe(4);
    for (const group of byGroup.values()) {
      expect(group).toHaveLength(5);
      const [first, second] = group as [RequestSpec, RequestSpec];
      expect(
        sharedPrefixLength(first.prompt as string, second.prompt as string),
      ).toBeGreaterThanOrEqual(64 * 4);
      expect(countTokens(first.prompt as string)).toBe(64 + 1 + 8); // system line + question
      expect(first.maxTokens).toBe(16);
    }
    const [g0, g1] = [...byGroup.values()].map((g) => g[0] as RequestSpec);
    expect(
      sharedPrefixLength(
        (g0 as RequestSpec).prompt as string,
        (g1 as RequestSpec).prompt as string,
      ),
    ).toBeLessThan(16);
  });

  it("orders requests in a shuffled arrival order, not group by group", () => {
    const groups = generatedSharedPrefix(opts).map((s) => s.group);
    expect(groups).not.toEqual([...groups].sort());
  });

  it("builds chat requests with a system and a user message on request", () => {
    const [spec] = generatedSharedPrefix({ ...opts, kind: "chat" });
    expect(spec?.kind).toBe("chat");
    expect(spec?.messages?.map((m) => m.role)).toEqual(["system", "user"]);
    expect(openAiBody(spec as RequestSpec, "m")).toMatchObject({ model: "m", max_tokens: 16 });
  });

  it("defaults to SGLang bench_serving's sizes", () => {
    const specs = generatedSharedPrefix({ groups: 1, promptsPerGroup: 1, seed: 0 });
    expect(countTokens(specs[0]?.prompt as string)).toBe(2048 + 1 + 128);
    expect(specs[0]?.maxTokens).toBe(256);
  });
});

describe("multiTurnChat", () => {
  const opts = {
    conversations: 3,
    turns: 4,
    systemPromptTokens: 32,
    turnTokens: 8,
    outputTokens: 12,
    seed: 9,
  };

  it("is deterministic per seed", () => {
    expect(multiTurnChat(opts)).toEqual(multiTurnChat(opts));
    expect(multiTurnChat({ ...opts, seed: 10 })).not.toEqual(multiTurnChat(opts));
  });

  it("re-sends the whole history each turn, with the simulator's own replies", () => {
    const specs = multiTurnChat(opts);
    expect(specs).toHaveLength(12);
    for (let c = 0; c < 3; c++) {
      const turns = specs
        .filter((s) => s.conversation === c)
        .sort((a, b) => (a.turn as number) - (b.turn as number));
      expect(turns.map((t) => t.messages?.length)).toEqual([2, 4, 6, 8]);
      for (let t = 1; t < turns.length; t++) {
        const prev = promptTextOf(turns[t - 1] as RequestSpec).replace(/<\|assistant\|>\n$/, "");
        const cur = promptTextOf(turns[t] as RequestSpec);
        expect(cur.startsWith(prev)).toBe(true);
        // The engine's tokens for the previous prompt are a prefix of this turn's tokens.
        const prevIds = tokenize(promptTextOf(turns[t - 1] as RequestSpec));
        expect(tokenize(cur).slice(0, prevIds.length)).toEqual(prevIds);
        expect(turns[t]?.messages?.at(-2)).toEqual({
          role: "assistant",
          content: generatedText(12),
        });
      }
    }
  });

  it("plays turn k of every conversation before turn k + 1, shuffled within a round", () => {
    const specs = multiTurnChat({ ...opts, conversations: 8 });
    const turns = specs.map((s) => s.turn as number);
    expect(turns).toEqual([...turns].sort((a, b) => a - b));
    const firstRound = specs.slice(0, 8).map((s) => s.conversation);
    expect(firstRound).not.toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it("can share one system prompt across conversations", () => {
    const specs = multiTurnChat({ ...opts, sharedSystemPrompt: true });
    const systems = new Set(specs.map((s) => s.messages?.[0]?.content));
    expect(systems.size).toBe(1);
    expect(new Set(multiTurnChat(opts).map((s) => s.messages?.[0]?.content)).size).toBe(3);
  });
});

describe("noSharing and hotPrefix", () => {
  it("noSharing prompts differ from the very first block", () => {
    const specs = noSharing({ requests: 50, promptTokens: 40, outputTokens: 4, seed: 3 });
    expect(specs).toHaveLength(50);
    const firstBlocks = new Set(
      specs.map((s) =>
        tokenize(s.prompt as string)
          .slice(0, 16)
          .join(","),
      ),
    );
    expect(firstBlocks.size).toBe(50);
    for (const s of specs) expect(countTokens(s.prompt as string)).toBe(40);
    expect(noSharing({ requests: 50, promptTokens: 40, outputTokens: 4, seed: 3 })).toEqual(specs);
  });

  it("hotPrefix shares one system prompt across every request", () => {
    const specs = hotPrefix({
      requests: 20,
      systemPromptTokens: 100,
      questionTokens: 10,
      outputTokens: 5,
      seed: 4,
    });
    expect(new Set(specs.map((s) => s.messages?.[0]?.content)).size).toBe(1);
    expect(new Set(specs.map((s) => s.messages?.[1]?.content)).size).toBe(20);
    expect(specs.every((s) => s.group === 0)).toBe(true);
  });

  it("rejects nonsense sizes", () => {
    expect(() => noSharing({ requests: 0, promptTokens: 4, outputTokens: 1, seed: 1 })).toThrow(
      RangeError,
    );
    expect(() =>
      hotPrefix({
        requests: 1,
        systemPromptTokens: 1.5,
        questionTokens: 1,
        outputTokens: 1,
        seed: 1,
      }),
    ).toThrow(RangeError);
  });
});

describe("arrival processes", () => {
  it("closed loop: no gaps, a fixed number outstanding", () => {
    const a = closedLoop(8);
    expect(a.concurrency).toBe(8);
    expect(a.gapsMs(3)).toEqual([0, 0, 0]);
  });

  it("poisson: seeded exponential gaps with mean 1000 / rate ms", () => {
    const a = poissonArrivals(50, 1);
    const gaps = a.gapsMs(20_000);
    expect(a.gapsMs(20_000)).toEqual(gaps);
    expect(poissonArrivals(50, 2).gapsMs(5)).not.toEqual(gaps.slice(0, 5));
    const mean = gaps.reduce((s, g) => s + g, 0) / gaps.length;
    expect(mean).toBeGreaterThan(19);
    expect(mean).toBeLessThan(21);
    expect(gaps.every((g) => g >= 0)).toBe(true);
    expect(a.concurrency).toBe(Number.POSITIVE_INFINITY);
    expect(() => poissonArrivals(0, 1)).toThrow(RangeError);
  });
});
