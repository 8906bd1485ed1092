import { describe, expect, it } from "vitest";
import { LeastLoaded, Rotation, spreadOffset } from "../../src/scheduling/rotation.js";

const loads = (...xs: number[]) => xs.map((inFlight) => ({ inFlight }));

describe("Rotation", () => {
  it("hands out 0, 1, ..., n-1 and wraps", () => {
    const rotation = new Rotation();
    expect(Array.from({ length: 7 }, () => rotation.next(3))).toEqual([0, 1, 2, 0, 1, 2, 0]);
  });

  it("stays in range when the candidate count shrinks or grows", () => {
    const rotation = new Rotation();
    for (let i = 0; i < 5; i++) rotation.next(5);
    expect(rotation.next(2)).toBe(1); // turn 5, 5 % 2
    expect(rotation.next(2)).toBe(0);
    expect(rotation.next(9)).toBe(1);
  });
});

describe("Rotation among replicas (rank)", () => {
  it("starts each replica's turns as far from the others' as the candidates allow", () => {
    expect([0, 1, 2, 3].map((rank) => spreadOffset(rank, 4))).toEqual([0, 2, 1, 3]);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map((rank) => spreadOffset(rank, 8))).toEqual([
      0, 4, 2, 6, 1, 5, 3, 7,
    ]);
    // Any count of candidates: the first n ranks take n different places, spread out.
    expect([0, 1, 2].map((rank) => spreadOffset(rank, 3))).toEqual([0, 1, 2]);
    expect([0, 1, 2, 3, 4].map((rank) => spreadOffset(rank, 5))).toEqual([0, 2, 1, 3, 4]);
    expect([0, 1, 2, 3, 4, 5].map((rank) => spreadOffset(rank, 6))).toEqual([0, 3, 1, 4, 2, 5]);
    for (let n = 1; n <= 40; n++) {
      const places = Array.from({ length: n }, (_, rank) => spreadOffset(rank, n));
      expect(new Set(places).size).toBe(n);
    }
    // A replica's place does not move when more join, and stays in range for any count.
    expect(spreadOffset(1, 2)).toBe(1);
    for (const n of [1, 2, 3, 5, 7])
      for (let rank = 0; rank < 40; rank++) {
        const offset = spreadOffset(rank, n);
        expect(offset >= 0 && offset < n).toBe(true);
      }
  });

  it("shifts the start by the rank's offset, and leaves rank 0 as it was", () => {
    const [alone, first, second] = [new Rotation(), new Rotation(), new Rotation()];
    const turns = (r: Rotation, rank?: number) => Array.from({ length: 5 }, () => r.next(4, rank));
    expect(turns(alone)).toEqual([0, 1, 2, 3, 0]);
    expect(turns(first, 0)).toEqual([0, 1, 2, 3, 0]);
    expect(turns(second, 1)).toEqual([2, 3, 0, 1, 2]);
    expect(new LeastLoaded().scan(loads(0, 0, 0, 0), 1)).toBe(2);
  });
});

describe("LeastLoaded", () => {
  it("returns -1 (scan) and undefined (pick) for no candidates", () => {
    expect(new LeastLoaded().scan([])).toBe(-1);
    expect(new LeastLoaded().pick([])).toBeUndefined();
  });

  it("picks the unique least-loaded candidate wherever the scan starts", () => {
    const picker = new LeastLoaded();
    const workers = loads(4, 9, 1, 7);
    for (let i = 0; i < 8; i++) expect(picker.pick(workers)).toBe(workers[2]);
  });

  it("rotates among equally least-loaded candidates, never always the first", () => {
    const picker = new LeastLoaded();
    const workers = loads(0, 3, 0, 0);
    const picked = Array.from({ length: 8 }, () => workers.indexOf(picker.pick(workers)!));
    // Starts 0,1,2,3: the first minimum at or after the start, wrapping.
    expect(picked).toEqual([0, 2, 2, 3, 0, 2, 2, 3]);
  });

  it("records the start, min and max load of its scan", () => {
    const picker = new LeastLoaded();
    picker.scan(loads(5, 2, 8));
    expect([picker.start, picker.min, picker.max]).toEqual([0, 2, 8]);
    picker.scan(loads(5, 2, 8));
    expect([picker.start, picker.min, picker.max]).toEqual([1, 2, 8]);
    picker.scan(loads(7));
    expect([picker.start, picker.min, picker.max]).toEqual([0, 7, 7]);
  });
});
