import { describe, expect, it } from "vitest";
import { renderChat } from "../../sim/template.js";
import { countTokens } from "../../sim/tokenizer.js";
import {
  type CachePressureOptions,
  cachePressure,
  promptTextOf,
  type RequestSpec,
} from "../../sim/workloads.js";

const SMALL: CachePressureOptions = {
  tenants: 6,
  zipfExponent: 1,
  toolPreambleTokens: 40,
  tenantPromptTokens: 24,
  conversations: 10,
  activeConversations: 4,
  turns: 3,
  turnTokens: 8,
  outputTokens: 5,
  seed: 11,
};

const systemOf = (spec: RequestSpec): string => spec.messages![0]!.content;

describe("cachePressure workload", () => {
  it("is the same for a seed and different for another", () => {
    expect(cachePressure(SMALL)).toEqual(cachePressure(SMALL));
    const other = cachePressure({ ...SMALL, seed: 12 });
    expect(other.map(promptTextOf)).not.toEqual(cachePressure(SMALL).map(promptTextOf));
  });

  it("sends every turn of every conversation once, as chats tagged with tenant, conversation and turn", () => {
    const specs = cachePressure(SMALL);
    expect(specs).toHaveLength(SMALL.conversations * SMALL.turns);
    expect(new Set(specs.map((s) => s.id)).size).toBe(specs.length);
    for (const spec of specs) {
      expect(spec.kind).toBe("chat");
      expect(spec.maxTokens).toBe(SMALL.outputTokens);
      expect(spec.group).toBeGreaterThanOrEqual(0);
      expect(spec.group).toBeLessThan(SMALL.tenants);
    }
    for (let c = 0; c < SMALL.conversations; c++) {
      const turns = specs.filter((s) => s.conversation === c).map((s) => s.turn);
      expect(turns).toEqual([0, 1, 2]);
    }
  });

  it("starts every system prompt with one shared tool preamble, then the tenant's own prompt", () => {
    const specs = cachePressure(SMALL);
    const preambleChars = SMALL.toolPreambleTokens * 4;
    const preamble = systemOf(specs[0]!).slice(0, preambleChars);
    const byTenant = new Map<number, string>();
    for (const spec of specs) {
      const system = systemOf(spec);
      expect(system.slice(0, preambleChars)).toBe(preamble);
      expect(countTokens(system)).toBeGreaterThanOrEqual(
        SMALL.toolPreambleTokens + SMALL.tenantPromptTokens,
      );
      const seen = byTenant.get(spec.group!);
      if (seen === undefined) byTenant.set(spec.group!, system);
      else expect(system).toBe(seen);
    }
    // Different tenants differ after the preamble.
    const systems = [...byTenant.values()];
    expect(new Set(systems).size).toBe(systems.length);
  });

  it("re-sends a conversation's whole history each turn, so its previous prompt is a prefix of the next", () => {
    const specs = cachePressure(SMALL);
    for (let c = 0; c < SMALL.conversations; c++) {
      const turns = specs.filter((s) => s.conversation === c);
      for (let t = 1; t < turns.length; t++) {
        const before = renderChat(turns[t - 1]!.messages!, false);
        expect(promptTextOf(turns[t]!).startsWith(before)).toBe(true);
        expect(turns[t]!.messages).toHaveLength(turns[t - 1]!.messages!.length + 2);
      }
      // One tenant per conversation.
      expect(new Set(turns.map((s) => s.group)).size).toBe(1);
    }
  });

  it("brings conversations in waves: every request of a wave comes before the next wave starts", () => {
    const specs = cachePressure(SMALL);
    const waveOf = (s: RequestSpec) => Math.floor(s.conversation! / SMALL.activeConversations);
    const waves = specs.map(waveOf);
    expect(waves).toEqual([...waves].sort((a, b) => a - b));
    // Within a wave, turn k of every conversation before turn k + 1.
    for (let w = 0; w <= Math.max(...waves); w++) {
      const turns = specs.filter((s) => waveOf(s) === w).map((s) => s.turn!);
      expect(turns).toEqual([...turns].sort((a, b) => a - b));
    }
  });

  it("draws tenants by Zipf popularity: a few tenants carry most conversations, and s = 0 is even", () => {
    const count = (o: CachePressureOptions) => {
      const perTenant = new Array<number>(o.tenants).fill(0);
      for (const s of cachePressure(o)) if (s.turn === 0) perTenant[s.group!]!++;
      return perTenant.sort((a, b) => b - a);
    };
    const many = { ...SMALL, tenants: 20, conversations: 400, activeConversations: 50, turns: 1 };
    const skewed = count({ ...many, zipfExponent: 1.2 });
    // Top share ≈ 1 / H(20, 1.2) ≈ 35%, against 5% for an even draw.
    expect(skewed[0]!).toBeGreaterThan(100);
    expect(skewed[0]!).toBeGreaterThan(5 * skewed[10]!);
    const even = count({ ...many, zipfExponent: 0 });
    expect(even[0]!).toBeLessThan(45);
    expect(even[19]!).toBeGreaterThan(5);
  });

  it("refuses bad sizes with a RangeError naming the option", () => {
    expect(() => cachePressure({ ...SMALL, tenants: 0 })).toThrow(/tenants/);
    expect(() => cachePressure({ ...SMALL, zipfExponent: -1 })).toThrow(/zipfExponent/);
    expect(() => cachePressure({ ...SMALL, activeConversations: 1.5 })).toThrow(
      /activeConversations/,
    );
  });
});

describe("cachePressure with a spread of tenant prompt lengths", () => {
  const tenantTokens = (spec: RequestSpec) =>
    countTokens(systemOf(spec)) - SMALL.toolPreambleTokens;

  it("draws each tenant's own prompt between the shortest and the longest, unequal across tenants", () => {
    const specs = cachePressure({ ...SMALL, tenants: 12, tenantPromptMaxTokens: 96 });
    const lengths = new Map<number, number>();
    for (const spec of specs) lengths.set(spec.group!, tenantTokens(spec));
    for (const n of lengths.values()) {
      // The preamble and the prompt are joined by a newline: a token more at most.
      expect(n).toBeGreaterThanOrEqual(SMALL.tenantPromptTokens);
      expect(n).toBeLessThanOrEqual(96 + 1);
    }
    expect(new Set(lengths.values()).size).toBeGreaterThan(1);
  });

  it("leaves the workload without a spread as it was (no extra draws)", () => {
    expect(cachePressure({ ...SMALL, tenantPromptMaxTokens: SMALL.tenantPromptTokens })).toEqual(
      cachePressure(SMALL),
    );
  });

  it("refuses a longest prompt shorter than the shortest", () => {
    expect(() => cachePressure({ ...SMALL, tenantPromptMaxTokens: 10 })).toThrow(
      /tenantPromptMaxTokens/,
    );
  });
});
