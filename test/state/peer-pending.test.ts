import { describe, expect, it } from "vitest";
import { PeerPending, type PendingLoad, readPendingPairs } from "../../src/state/peer-pending.js";

/** Workers that remember what the peers' queued prefill was last set to. */
function fleet() {
  const set = new Map<string, [number, number]>();
  const pending = new PeerPending((id) => ({
    setPeerPendingPrefill: (chars: number, requests: number) => set.set(id, [chars, requests]),
  }));
  return { pending, of: (id: string) => set.get(id) ?? [0, 0] };
}

const report = (entries: [string, number, number][]) =>
  new Map<string, PendingLoad>(entries.map(([id, chars, requests]) => [id, { chars, requests }]));

describe("peers' queued prefill", () => {
  it("counts a peer's decision at once, and its report replaces the decisions it covers", () => {
    const { pending, of } = fleet();
    pending.decided("redis:a", 750, "w1", 4000, 7, 1000);
    pending.decided("redis:a", 750, "w1", 1000, 8, 1001);
    pending.decided("redis:b", 750, "w1", 500, 3, 1001);
    expect(of("w1")).toEqual([5500, 3]);
    // a's report was written after its op 7 and before its op 8: 8 still counts on top of it.
    pending.reported("redis:a", 750, report([["w1", 4000, 1]]), 7, 1002);
    expect(of("w1")).toEqual([5500, 3]);
    // The request's first byte: a's next report has nothing queued there, and covers op 8.
    pending.reported("redis:a", 750, report([]), 8, 1003);
    expect(of("w1")).toEqual([500, 1]);
    pending.gone("redis:b");
    expect(of("w1")).toEqual([0, 0]);
  });

  it("on an ordered channel a report covers every decision received before it", () => {
    const { pending, of } = fleet();
    pending.decided("sib:1", 500, "w1", 300, undefined, 0);
    pending.decided("sib:1", 500, "w2", 200, undefined, 0);
    pending.reported("sib:1", 500, report([["w2", 200, 1]]), undefined, 1);
    expect(of("w1")).toEqual([0, 0]);
    expect(of("w2")).toEqual([200, 1]);
  });

  it("a decision no report covers stops counting after its peer's TTL; a transport's peers go together", () => {
    const { pending, of } = fleet();
    pending.decided("redis:a", 750, "w1", 4000, 1, 1000);
    pending.decided("sib:2", 500, "w2", 100, undefined, 1000);
    pending.expire(1700);
    expect(of("w1")).toEqual([4000, 1]);
    expect(of("w2")).toEqual([0, 0]);
    pending.expire(1751);
    expect(of("w1")).toEqual([0, 0]);
    pending.reported("redis:a", 750, report([["w1", 10, 1]]), 1, 1800);
    pending.reported("redis:c", 750, report([["w1", 20, 1]]), 1, 1800);
    expect(of("w1")).toEqual([30, 2]);
    pending.goneAll("redis:");
    expect(of("w1")).toEqual([0, 0]);
  });

  it("stays bounded however many decisions a peer sends without a report", () => {
    const { pending, of } = fleet();
    for (let i = 1; i <= 5000; i++) pending.decided("redis:a", 60_000, "w1", 1, i, 1000);
    expect(of("w1")[1]).toBeLessThanOrEqual(1024);
    expect(of("w1")[1]).toBeGreaterThan(0);
  });
});

describe("readPendingPairs", () => {
  it("keeps positive integer pairs by worker id and skips anything else, over either transport's report", () => {
    const kept: [string, number, number][] = [];
    readPendingPairs(
      {
        a: [10, 1],
        b: [0, 1],
        c: [5, -1],
        d: [1.5, 1],
        e: [1, 2, 3],
        f: "x",
        [`${"w".repeat(4097)}`]: [1, 1],
      },
      (id, chars, requests) => kept.push([id, chars, requests]),
    );
    expect(kept).toEqual([["a", 10, 1]]);
    readPendingPairs(null, () => kept.push(["null", 0, 0]));
    readPendingPairs("a", () => kept.push(["string", 0, 0]));
    expect(kept).toHaveLength(1);
  });
});
