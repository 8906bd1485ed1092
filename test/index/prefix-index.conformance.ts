import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { modelChars, modelMatch, splitsPair } from "../tree/reference-model.js";
import { PIECES, scenario, seenQuery, text } from "../tree/text-arbitraries.js";

/**
 * One property suite every PrefixIndex must pass (approximate per-worker trees, the shared tree),
 * held to a naive model: each worker's set of routed strings, compared one by one.
 */
export interface IndexUnderTest {
  make(options: { maxTreeSize?: number }): PrefixIndex;
  /** Throws when the index's internal invariants do not hold (full traversal). */
  check(index: PrefixIndex): void;
}

const WORKERS = ["w0", "w1", "w2"];
const UNKNOWN = "never-added";

type Op =
  | { kind: "insert"; worker: number; text: string }
  | { kind: "match"; text: string }
  | { kind: "matchSeen"; index: number; cut: number; extra: string }
  | { kind: "truncate"; worker: number; index: number; cut: number; keep: number }
  | { kind: "remove"; worker: number }
  | { kind: "budget"; worker: number; chars: number }
  | { kind: "sweep" };

const worker = fc.nat({ max: WORKERS.length - 1 });

function ops(prefixes: string[], withBudgets: boolean): fc.Arbitrary<Op[]> {
  const insert = fc
    .tuple(worker, text(prefixes))
    .map(([w, t]): Op => ({ kind: "insert", worker: w, text: t }));
  const choices: fc.Arbitrary<Op>[] = [
    insert,
    insert,
    insert,
    text(prefixes).map((t): Op => ({ kind: "match", text: t })),
    seenQuery.map((r): Op => ({ kind: "matchSeen", ...r })),
    fc
      .record({ worker, index: fc.nat(), cut: fc.nat({ max: 200 }), keep: fc.nat({ max: 200 }) })
      .map((r): Op => ({ kind: "truncate", ...r })),
    worker.map((w): Op => ({ kind: "remove", worker: w })),
  ];
  if (withBudgets) {
    choices.push(
      fc
        .tuple(worker, fc.integer({ min: 1, max: 300 }))
        .map(([w, chars]): Op => ({ kind: "budget", worker: w, chars })),
      fc.constant<Op>({ kind: "sweep" }),
    );
  }
  return fc.array(fc.oneof(...choices), { minLength: 1, maxLength: 60, size: "max" });
}

/** The naive truncate: every string sharing more than `keep` code units with text is cut to it. */
function modelTruncate(strings: string[], t: string, keep: number): string[] {
  let cut = Math.min(keep, t.length);
  if (splitsPair(t, cut)) cut--;
  return strings
    .map((s) => (modelMatch([s], t) > cut ? s.slice(0, cut) : s))
    .filter((s) => s.length > 0);
}

/** What a match op asks about: its own text, or a cut of an earlier insert plus a piece. */
function queryOf(op: Op, seen: string[]): string {
  if (op.kind === "match") return op.text;
  if (op.kind !== "matchSeen" || seen.length === 0) return "";
  return seen[op.index % seen.length]!.slice(0, op.cut) + op.extra;
}

/** A prefix of an earlier insert (seen must not be empty). */
function cutOfSeen(seen: string[], at: { index: number; cut: number }): string {
  const base = seen[at.index % seen.length]!;
  return base.slice(0, at.cut % (base.length + 1));
}

function matchAll(index: PrefixIndex, q: string): number[] {
  const out: number[] = [];
  index.match(
    q,
    undefined,
    [...WORKERS, UNKNOWN].map((id) => ({ id })),
    out,
  );
  return out;
}

export function describePrefixIndex(name: string, subject: IndexUnderTest): void {
  describe(`${name}: PrefixIndex conformance`, () => {
    it("each worker's matches and size equal the naive model of what was routed to it", () => {
      fc.assert(
        fc.property(
          scenario((p) => ops(p, false)),
          (sequence) => {
            const index = subject.make({});
            for (const id of WORKERS) index.addWorker(id);
            const held = WORKERS.map((): string[] => []);
            const seen: string[] = [];
            for (const op of sequence) {
              if (op.kind === "insert") {
                index.insert(WORKERS[op.worker]!, undefined, op.text);
                if (op.text.length > 0) {
                  held[op.worker]!.push(op.text);
                  seen.push(op.text);
                }
              } else if (op.kind === "truncate") {
                if (seen.length === 0) continue;
                const t = cutOfSeen(seen, op);
                const id = WORKERS[op.worker]!;
                const before = index.size(id);
                const removed = index.truncate(id, undefined, t, op.keep);
                held[op.worker] = modelTruncate(held[op.worker]!, t, op.keep);
                expect(removed).toBe(before - index.size(id));
                expect(matchAll(index, t)[op.worker]!).toBeLessThanOrEqual(op.keep);
              } else if (op.kind === "remove") {
                index.removeWorker(WORKERS[op.worker]!);
                index.addWorker(WORKERS[op.worker]!);
                held[op.worker] = [];
              } else {
                const q = queryOf(op, seen);
                const got = matchAll(index, q);
                WORKERS.forEach((_, w) => {
                  expect(got[w]).toBe(q.length === 0 ? 0 : modelMatch(held[w]!, q));
                  expect(splitsPair(q, got[w]!)).toBe(false);
                });
                expect(got[WORKERS.length]).toBe(0);
              }
              WORKERS.forEach((id, w) => {
                expect(index.size(id)).toBe(modelChars(held[w]!));
              });
              expect(index.size(UNKNOWN)).toBe(0);
              subject.check(index);
            }
            WORKERS.forEach((_id, w) => {
              for (const s of held[w]!) expect(matchAll(index, s)[w]).toBe(s.length);
            });
          },
        ),
        { numRuns: 250 },
      );
    });

    it("budgets hold per worker: eviction never touches another worker, never invents a match", () => {
      fc.assert(
        fc.property(
          scenario((p) => ops(p, true)),
          fc.integer({ min: 20, max: 400 }),
          (sequence, maxTreeSize) => {
            const index = subject.make({ maxTreeSize });
            for (const id of WORKERS) index.addWorker(id);
            const budgets = WORKERS.map(() => maxTreeSize);
            // Everything ever routed to each worker: nothing may match beyond it.
            const ever = WORKERS.map((): string[] => []);
            const seen: string[] = [];
            const probes = (texts: string[]): number[][] => texts.map((q) => matchAll(index, q));
            for (const op of sequence) {
              const touched = "worker" in op ? op.worker : -1;
              const sizesBefore = WORKERS.map((id) => index.size(id));
              const probeTexts = [...seen.slice(-6), ...PIECES.slice(0, 3)];
              const probesBefore = probes(probeTexts);
              if (op.kind === "insert") {
                const id = WORKERS[op.worker]!;
                index.insert(id, undefined, op.text);
                if (op.text.length > 0) {
                  ever[op.worker]!.push(op.text);
                  seen.push(op.text);
                  // The text just routed is the worker's newest: it survives whole if it fits.
                  if (modelChars([op.text]) <= budgets[op.worker]!) {
                    expect(matchAll(index, op.text)[op.worker]).toBe(op.text.length);
                  }
                }
                expect(index.size(id)).toBeLessThanOrEqual(
                  Math.max(
                    Math.floor(budgets[op.worker]! * 1.1),
                    sizesBefore[op.worker]! + op.text.length,
                  ),
                );
              } else if (op.kind === "budget") {
                const id = WORKERS[op.worker]!;
                const before = index.size(id);
                const evicted = index.setBudget(id, op.chars);
                budgets[op.worker] = op.chars;
                expect(evicted).toBe(before - index.size(id));
                expect(index.size(id)).toBeLessThanOrEqual(op.chars);
              } else if (op.kind === "sweep") {
                for (const unit of index.evictionUnits()) unit.evict();
                WORKERS.forEach((id, w) => {
                  expect(index.size(id)).toBeLessThanOrEqual(budgets[w]!);
                });
              } else if (op.kind === "truncate") {
                if (seen.length === 0) continue;
                const t = cutOfSeen(seen, op);
                index.truncate(WORKERS[op.worker]!, undefined, t, op.keep);
                expect(matchAll(index, t)[op.worker]!).toBeLessThanOrEqual(op.keep);
              } else if (op.kind === "remove") {
                index.removeWorker(WORKERS[op.worker]!);
                expect(index.size(WORKERS[op.worker]!)).toBe(0);
                index.addWorker(WORKERS[op.worker]!);
                index.setBudget(WORKERS[op.worker]!, budgets[op.worker]!);
                ever[op.worker] = [];
              } else {
                const q = queryOf(op, seen);
                const got = matchAll(index, q);
                WORKERS.forEach((_, w) => {
                  expect(got[w]!).toBeLessThanOrEqual(modelMatch(ever[w]!, q));
                  expect(splitsPair(q, got[w]!)).toBe(false);
                });
              }
              // Whatever happened to one worker, the others hold exactly what they held.
              const probesAfter = probes(probeTexts);
              WORKERS.forEach((id, w) => {
                if (w === touched || op.kind === "sweep") return;
                expect(index.size(id)).toBe(sizesBefore[w]);
                probesBefore.forEach((row, p) => {
                  expect(probesAfter[p]![w]).toBe(row[w]);
                });
              });
              subject.check(index);
            }
          },
        ),
        { numRuns: 250 },
      );
    });

    it("refuses a budget that is not a positive integer, and a negative truncate", () => {
      const index = subject.make({});
      index.addWorker("a");
      for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(() => index.setBudget("a", bad)).toThrow(RangeError);
      }
      expect(() => index.truncate("a", undefined, "abc", -1)).toThrow(RangeError);
    });

    it("keeps a budget set through setBudget on every insert, with no high-water slack", () => {
      const index = subject.make({});
      index.addWorker("a");
      index.setBudget("a", 500);
      for (let i = 0; i < 300; i++) {
        index.insert("a", undefined, `conversation ${i} ${"y".repeat(i % 37)}`);
        expect(index.size("a")).toBeLessThanOrEqual(500);
      }
      subject.check(index);
    });

    it("keeps models apart: text routed for one model never matches another, budgets are per worker", () => {
      const index = subject.make({});
      index.addWorker("a");
      const one = (q: string, model: string | undefined): number => {
        const out: number[] = [];
        index.match(q, model, [{ id: "a" }], out);
        return out[0]!;
      };
      index.insert("a", "llama", "shared prompt text");
      expect(one("shared prompt text", "llama")).toBe(18);
      expect(one("shared prompt text", "qwen")).toBe(0);
      expect(one("shared prompt text", undefined)).toBe(0);
      index.insert("a", "qwen", "shared prompt");
      index.insert("a", undefined, "shared");
      expect(one("shared prompt text", "qwen")).toBe(13);
      expect(one("shared prompt text", undefined)).toBe(6);
      const sizeWithBoth = index.size("a");
      expect(index.truncate("a", "qwen", "shared prompt", 6)).toBe(7);
      expect(index.size("a")).toBe(sizeWithBoth - 7);
      expect(one("shared prompt text", "llama")).toBe(18);
      expect(one("shared prompt text", "qwen")).toBe(6);
      subject.check(index);
    });

    it("ignores unknown workers and empty text", () => {
      const index = subject.make({});
      index.insert(UNKNOWN, undefined, "hello");
      index.addWorker("a");
      index.insert("a", undefined, "");
      expect(index.size("a")).toBe(0);
      expect(index.truncate(UNKNOWN, undefined, "hello", 0)).toBe(0);
      expect(index.setBudget(UNKNOWN, 10)).toBe(0);
      index.insert("a", undefined, "hello");
      const out = [7, 7];
      index.match("", undefined, [{ id: "a" }, { id: UNKNOWN }], out);
      expect(out).toEqual([0, 0]);
      index.match("help", undefined, [{ id: "a" }, { id: UNKNOWN }], out);
      expect(out).toEqual([3, 0]);
      subject.check(index);
    });
  });
}
