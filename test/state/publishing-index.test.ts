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
});
