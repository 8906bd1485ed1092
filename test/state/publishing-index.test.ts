import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { PublishingIndex } from "../../src/state/publishing-index.js";
import type { StateOp } from "../../src/state/state-op.js";

const setup = (maxTextChars = 8) => {
  const inner = new ApproximateIndex();
  const published: StateOp[] = [];
  const index = new PublishingIndex(inner, (op) => published.push(op), maxTextChars);
  index.addWorker("w1");
  return { inner, index, published };
};

describe("PublishingIndex", () => {
  it("inserts into the inner index and publishes the first maxTextChars characters", () => {
    const { inner, index, published } = setup();
    index.insert("w1", "m", "0123456789abc");
    const out: number[] = [];
    inner.match("0123456789abc", "m", [{ id: "w1" }], out);
    expect(out).toEqual([13]);
    expect(published).toEqual([{ kind: "insert", worker: "w1", model: "m", text: "01234567" }]);
  });

  it("answers matches from the inner index under the inner index's name", () => {
    const { index } = setup();
    index.insert("w1", undefined, "hello world");
    const out: number[] = [];
    index.match("hello there", undefined, [{ id: "w1" }], out);
    expect(out).toEqual([6]);
    expect(index.name).toBe("approx");
  });

  it("publishes a truncate only when it takes back part of the shared text", () => {
    const { index, published } = setup();
    index.insert("w1", undefined, "0123456789abc");
    published.length = 0;
    index.truncate("w1", undefined, "0123456789abc", 10);
    expect(published).toEqual([]);
    index.truncate("w1", undefined, "0123456789abc", 3);
    expect(published).toEqual([{ kind: "truncate", worker: "w1", text: "01234567", keep: 3 }]);
  });

  it("publishes nothing for an empty text", () => {
    const { index, published } = setup();
    index.insert("w1", undefined, "");
    expect(published).toEqual([]);
  });

  it("passes on the rank the inner index chose for a data-parallel worker (ForwardingIndex)", () => {
    // A hybrid index over data-parallel engines names the rank a request goes to; under
    // --state-url the publishing index wraps it, and that rank must still reach the decider.
    const inner = Object.assign(new ApproximateIndex(), {
      rankOf: (id: string) => (id === "w1" ? 3 : undefined),
    });
    const index = new PublishingIndex(inner, () => {}, 8);
    expect(index.rankOf?.("w1")).toBe(3);
    expect(index.rankOf?.("w2")).toBeUndefined();
  });
});
