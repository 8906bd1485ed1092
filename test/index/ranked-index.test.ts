import { describe, expect, it } from "vitest";
import { createBaseIndex, PREFIX_INDEX_NAMES } from "../../src/index/factory.js";
import { RankedIndex } from "../../src/index/ranked-index.js";

/** A fleet where worker "dp" runs `ranks` data-parallel ranks and "one" runs none. */
function fleet(ranks: number, loads: number[] = []) {
  const state = { ranks, loads };
  const source = {
    ranksOf: (id: string) => (id === "dp" ? state.ranks : 1),
    rankLoad: (_id: string, rank: number) => state.loads[rank] ?? 0,
  };
  return { state, source };
}

const workers = [{ id: "dp" }, { id: "one" }];
const A = "system prompt A, shared by a long conversation. ".repeat(8);
const B = "another system prompt B, for other users. ".repeat(8);

describe.each(PREFIX_INDEX_NAMES.filter((n) => n !== "block_hash"))(
  "RankedIndex over the %s index (--dp-aware)",
  (name) => {
    const make = (ranks: number, loads?: number[]) => {
      const { state, source } = fleet(ranks, loads);
      const index = new RankedIndex(createBaseIndex(name, { maxTreeSize: 1 << 20 }), source);
      for (const w of workers) index.addWorker(w.id);
      return { index, state };
    };
    const matchOf = (index: RankedIndex, text: string) => {
      const out = [0, 0];
      index.match(text, undefined, workers, out);
      return out;
    };

    it("a tie between ranks goes to the least loaded; the text is recorded on the rank chosen", () => {
      const { index, state } = make(2, [3, 1]);
      expect(matchOf(index, A)).toEqual([0, 0]);
      expect(index.rankOf("dp")).toBe(1);
      expect(index.rankOf("one")).toBeUndefined();
      index.insert("dp", undefined, A);
      // Rank 1 holds A now: A goes there even once rank 1 is the busier one.
      state.loads = [0, 5];
      expect(matchOf(index, A)[0]).toBe(A.length);
      expect(index.rankOf("dp")).toBe(1);
      // B is held nowhere: the least loaded rank, 0, and it is recorded there only.
      expect(matchOf(index, B)).toEqual([0, 0]);
      expect(index.rankOf("dp")).toBe(0);
      index.insert("dp", undefined, B);
      expect(index.size("dp")).toBe(A.length + B.length);
      state.loads = [9, 0];
      expect(matchOf(index, B)[0]).toBe(B.length);
      expect(index.rankOf("dp")).toBe(0);
    });

    it("ranks learned later are followed; a removed worker's ranks are forgotten", () => {
      const { index, state } = make(1);
      matchOf(index, A);
      expect(index.rankOf("dp")).toBeUndefined();
      index.insert("dp", undefined, A);
      state.ranks = 3;
      state.loads = [1, 1, 0];
      expect(matchOf(index, B)[0]).toBe(0);
      expect(index.rankOf("dp")).toBe(2);
      index.insert("dp", undefined, B);
      index.removeWorker("dp");
      index.addWorker("dp");
      expect(index.size("dp")).toBe(0);
      expect(matchOf(index, A)).toEqual([0, 0]);
    });

    it("a worker without ranks is as the inner index has it; NaN ranks count as one", () => {
      const { index, state } = make(Number.NaN);
      index.insert("one", undefined, A);
      expect(matchOf(index, A)).toEqual([0, A.length]);
      expect(index.rankOf("dp")).toBeUndefined();
      state.ranks = 2;
      index.setBudget("dp", 100);
      index.insert("dp", undefined, A);
      // Each rank's tree gets half of the worker's budget.
      expect(index.size("dp")).toBeLessThanOrEqual(50);
    });
  },
);
