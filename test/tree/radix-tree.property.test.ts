import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { RadixTree } from "../../src/tree/radix-tree.js";
import { modelChars, modelMatch, splitsPair } from "./reference-model.js";
import { piece, scenario, seenQuery, text } from "./text-arbitraries.js";

type Op =
  | { kind: "insert"; text: string }
  | { kind: "match"; text: string }
  /** Match something derived from an earlier insert: a cut of it, plus a piece. */
  | { kind: "matchSeen"; index: number; cut: number; extra: string }
  | { kind: "evict"; target: number };

function ops(prefixes: string[], withEvict: boolean): fc.Arbitrary<Op[]> {
  const choices: fc.Arbitrary<Op>[] = [
    text(prefixes).map((t): Op => ({ kind: "insert", text: t })),
    text(prefixes).map((t): Op => ({ kind: "insert", text: t })),
    text(prefixes).map((t): Op => ({ kind: "match", text: t })),
    seenQuery.map((r): Op => ({ kind: "matchSeen", ...r })),
  ];
  if (withEvict) {
    choices.push(fc.nat({ max: 300 }).map((target): Op => ({ kind: "evict", target })));
  }
  return fc.array(fc.oneof(...choices), { minLength: 1, maxLength: 60, size: "max" });
}

function queryOf(op: Op, seen: string[]): string {
  if (op.kind === "match") return op.text;
  if (op.kind !== "matchSeen" || seen.length === 0) return "";
  const base = seen[op.index % seen.length]!;
  return base.slice(0, op.cut % (base.length + 1)) + op.extra;
}

function expectCountersExact(tree: RadixTree): void {
  expect(tree.recount()).toEqual({ chars: tree.charCount, nodes: tree.nodeCount });
}

describe("RadixTree against the reference model (no eviction)", () => {
  it("match equals the model's longest code-point prefix and charCount its distinct prefixes", () => {
    fc.assert(
      fc.property(
        scenario((p) => ops(p, false)),
        (sequence) => {
          const tree = new RadixTree();
          const seen: string[] = [];
          for (const op of sequence) {
            if (op.kind === "insert") {
              tree.insert(op.text);
              if (op.text.length > 0) seen.push(op.text);
              expect(tree.charCount).toBe(modelChars(seen));
            } else if (op.kind !== "evict") {
              const q = queryOf(op, seen);
              const got = tree.match(q);
              expect(got).toBe(modelMatch(seen, q));
              expect(splitsPair(q, got)).toBe(false);
            }
            expectCountersExact(tree);
          }
          for (const s of seen) expect(tree.match(s)).toBe(s.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("every inserted string round-trips whole, and one piece past it matches only what was inserted", () => {
    fc.assert(
      fc.property(
        scenario((p) => fc.array(text(p), { minLength: 1, maxLength: 30, size: "max" })),
        piece,
        (texts, extra) => {
          const tree = new RadixTree();
          for (const t of texts) tree.insert(t);
          const present = texts.filter((t) => t.length > 0);
          for (const t of present) {
            expect(tree.match(t)).toBe(t.length);
            expect(tree.match(t + extra)).toBe(modelMatch(present, t + extra));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe("RadixTree against the reference model (with eviction)", () => {
  it("evicts in LRU order: the most recent strings that fit survive whole, nothing is invented", () => {
    fc.assert(
      fc.property(
        scenario((p) => ops(p, true)),
        fc.integer({ min: 20, max: 400 }),
        fc.constantFrom(1, 1.1, 1.5, 3),
        fc.boolean(),
        (sequence, maxChars, highWaterRatio, evictTailFirst) => {
          let evictions = 0;
          // Tail first, an eviction takes exactly what is over the target: the oldest leaf's end
          // (one character more where the cut would split a surrogate pair).
          const onlyTheExcess = (target: number): void => {
            if (!evictTailFirst) return;
            expect(tree.charCount).toBeGreaterThanOrEqual(target - 1);
          };
          const tree = new RadixTree({
            maxChars,
            highWaterRatio,
            evictTailFirst,
            onEvict: (n) => {
              expect(n).toBeGreaterThan(0);
              evictions++;
            },
          });
          // Every string ever inserted: the tree may never match more than these allow.
          const ever: string[] = [];
          // Strings guaranteed whole in the tree, most recently inserted first (always the top of
          // the recency order, so LRU eviction must keep the longest run of them that fits).
          let present: string[] = [];
          const evictTo = (target: number): void => {
            let keep = 0;
            while (keep < present.length && modelChars(present.slice(0, keep + 1)) <= target) {
              keep++;
            }
            present = present.slice(0, keep);
            for (const s of present) expect(tree.match(s)).toBe(s.length);
          };
          for (const op of sequence) {
            if (op.kind === "insert") {
              const before = evictions;
              tree.insert(op.text);
              if (op.text.length > 0) {
                ever.push(op.text);
                present = [op.text, ...present.filter((s) => s !== op.text)];
              }
              if (evictions > before) {
                expect(evictions).toBe(before + 1);
                expect(tree.charCount).toBeLessThanOrEqual(maxChars);
                onlyTheExcess(maxChars);
                evictTo(maxChars);
              }
              expect(tree.charCount).toBeLessThanOrEqual(Math.floor(maxChars * highWaterRatio));
            } else if (op.kind === "evict") {
              const before = tree.charCount;
              const evicted = tree.evict(op.target);
              expect(evicted).toBe(before - tree.charCount);
              expect(tree.charCount).toBeLessThanOrEqual(op.target);
              if (before <= op.target) expect(evicted).toBe(0);
              else onlyTheExcess(op.target);
              evictTo(op.target);
            } else {
              const q = queryOf(op, ever);
              const got = tree.match(q);
              expect(got).toBeLessThanOrEqual(modelMatch(ever, q));
              expect(got).toBeGreaterThanOrEqual(modelMatch(present, q));
              expect(splitsPair(q, got)).toBe(false);
            }
            expectCountersExact(tree);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("RadixTree.truncate against the reference model", () => {
  /** The model's truncate: every string sharing more than `keep` code units with text is cut to `keep`. */
  function modelTruncate(strings: string[], text: string, keep: number): string[] {
    let cut = Math.min(keep, text.length);
    if (splitsPair(text, cut)) cut--;
    return strings
      .map((s) => (modelMatch([s], text) > cut ? s.slice(0, cut) : s))
      .filter((s) => s.length > 0);
  }

  it("cuts every string that extends the kept prefix, keeps the rest, and keeps counters exact", () => {
    fc.assert(
      fc.property(
        scenario((p) =>
          fc.tuple(
            fc.array(text(p), { minLength: 1, maxLength: 20, size: "max" }),
            fc.array(fc.tuple(text(p), fc.nat({ max: 250 })), { minLength: 1, maxLength: 6 }),
          ),
        ),
        ([texts, cuts]) => {
          const tree = new RadixTree();
          let model = texts.filter((t) => t.length > 0);
          for (const t of texts) tree.insert(t);
          for (const [t, keep] of cuts) {
            const before = tree.charCount;
            const removed = tree.truncate(t, keep);
            model = modelTruncate(model, t, keep);
            expect(before - tree.charCount).toBe(removed);
            expect(tree.charCount).toBe(modelChars(model));
            expect(tree.match(t)).toBe(modelMatch(model, t));
            expect(tree.match(t)).toBeLessThanOrEqual(keep);
            expectCountersExact(tree);
            for (const s of model) expect(tree.match(s)).toBe(s.length);
          }
          // What is left still evicts in order and to zero.
          tree.evict(0);
          expect(tree.charCount).toBe(0);
          expectCountersExact(tree);
        },
      ),
      { numRuns: 300 },
    );
  });
});
