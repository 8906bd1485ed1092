import { describe, expect, it } from "vitest";
import {
  LeastLoadPolicy,
  PowerOfTwoPolicy,
  RandomPolicy,
  RoundRobinPolicy,
} from "../../src/scheduling/builtin-profiles.js";
import { fleet, seededRandom, selectWith } from "./fake-worker.js";

/** A random source that replays `values` in order (then repeats them). */
function scripted(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}

describe("round_robin", () => {
  it("takes each candidate in turn, ignoring load and prefixes", () => {
    const policy = new RoundRobinPolicy();
    const workers = fleet(3, [100, 0, 0]);
    workers[2]!.tree.insert("hello");
    const ids = Array.from({ length: 6 }, () => selectWith(policy, workers, { text: "hello" })!);
    expect(ids.map((d) => d.worker.id)).toEqual(["w0", "w1", "w2", "w0", "w1", "w2"]);
    expect(ids.every((d) => d.branch === "round_robin" && d.matchRate === null)).toBe(true);
  });

  it("does not touch the trees", () => {
    const workers = fleet(2);
    selectWith(new RoundRobinPolicy(), workers, { text: "hello" });
    expect(workers.map((w) => w.tree.charCount)).toEqual([0, 0]);
  });
});

describe("random", () => {
  it("indexes the candidates with the injected random source", () => {
    const policy = new RandomPolicy(scripted(0, 0.5, 0.99));
    const workers = fleet(4);
    const ids = Array.from(
      { length: 3 },
      () => selectWith(policy, workers, { text: "x" })!.worker.id,
    );
    expect(ids).toEqual(["w0", "w2", "w3"]);
  });

  it("stays on a candidate when the source misbehaves (returns 1 or NaN)", () => {
    const workers = fleet(3);
    expect(selectWith(new RandomPolicy(() => 1), workers, { text: "" })!.worker).toBe(workers[0]);
    expect(selectWith(new RandomPolicy(() => Number.NaN), workers, { text: "" })!.worker).toBe(
      workers[0],
    );
  });

  it("is roughly uniform and labels its decisions", () => {
    const policy = new RandomPolicy(seededRandom(1));
    const workers = fleet(4);
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) {
      const d = selectWith(policy, workers, { text: "abc" })!;
      expect(d.branch).toBe("random");
      expect(d.matchRate).toBeNull();
      counts[workers.indexOf(d.worker)]!++;
    }
    for (const c of counts) expect(c).toBeGreaterThan(850);
    expect(workers.map((w) => w.tree.charCount)).toEqual([0, 0, 0, 0]);
  });
});

describe("power_of_two", () => {
  it("draws two distinct candidates and keeps the one with fewer in-flight", () => {
    const workers = fleet(4, [9, 2, 5, 7]);
    // first = floor(0.0 * 4) = 0, second = floor(0.0 * 3) = 0, skipped to 1 → w0 (9) vs w1 (2).
    expect(selectWith(new PowerOfTwoPolicy(scripted(0, 0)), workers, { text: "" })!.worker.id).toBe(
      "w1",
    );
    // first = floor(0.6 * 4) = 2, second = floor(0.5 * 3) = 1, not skipped → w2 (5) vs w1 (2).
    expect(
      selectWith(new PowerOfTwoPolicy(scripted(0.6, 0.5)), workers, { text: "" })!.worker.id,
    ).toBe("w1");
    // first = 2, second = floor(0.7 * 3) = 2 → skips to 3 → w2 (5) vs w3 (7).
    expect(
      selectWith(new PowerOfTwoPolicy(scripted(0.6, 0.7)), workers, { text: "" })!.worker.id,
    ).toBe("w2");
  });

  it("never compares a candidate with itself: of two, the less loaded always wins", () => {
    const workers = fleet(2, [10, 0]);
    // Both draws 0: first = w0, and the second must skip to w1 (a self-comparison would give w0).
    expect(selectWith(new PowerOfTwoPolicy(scripted(0, 0)), workers, { text: "" })!.worker.id).toBe(
      "w1",
    );
    const policy = new PowerOfTwoPolicy(seededRandom(5));
    for (let i = 0; i < 200; i++) {
      expect(selectWith(policy, workers, { text: "" })!.worker.id).toBe("w1");
    }
  });

  it("never returns the most loaded of three or more", () => {
    const policy = new PowerOfTwoPolicy(seededRandom(3));
    const workers = fleet(5, [1, 2, 3, 4, 50]);
    for (let i = 0; i < 500; i++) {
      const d = selectWith(policy, workers, { text: "" })!;
      expect(d.worker.id).not.toBe("w4");
      expect(d).toMatchObject({ branch: "power_of_two", matchRate: null });
    }
  });
});

describe("least_load", () => {
  it("takes the candidate with the fewest in-flight requests", () => {
    const policy = new LeastLoadPolicy();
    const workers = fleet(4, [3, 8, 1, 5]);
    const d = selectWith(policy, workers, { text: "hello" })!;
    expect(d).toMatchObject({ worker: workers[2], branch: "least_load", matchRate: null });
    expect(workers.map((w) => w.tree.charCount)).toEqual([0, 0, 0, 0]);
  });

  it("rotates among equally loaded candidates", () => {
    const policy = new LeastLoadPolicy();
    const workers = fleet(4);
    const ids = Array.from(
      { length: 8 },
      () => selectWith(policy, workers, { text: "" })!.worker.id,
    );
    expect(ids).toEqual(["w0", "w1", "w2", "w3", "w0", "w1", "w2", "w3"]);
  });
});
