/** Issue 20 item 6: the write-stall watch counts progress, not time since the socket filled. */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { StallWatch } from "../../src/proxy/stall-watch.js";

describe("StallWatch", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  const watch = (limitMs: number) => {
    const res = { writableLength: 1000, writableNeedDrain: true };
    let stalled = 0;
    const w = new StallWatch(res, limitMs, () => stalled++);
    return { res, w, stalled: () => stalled };
  };

  it("fires once the client took nothing for the whole limit", () => {
    const { w, stalled } = watch(1000);
    w.start();
    vi.advanceTimersByTime(999);
    expect(stalled()).toBe(0);
    vi.advanceTimersByTime(2);
    expect(stalled()).toBe(1);
    vi.advanceTimersByTime(10_000);
    expect(stalled()).toBe(1);
  });

  it("a client that takes some bytes each period is progress: a slow reader is not cut", () => {
    const { res, w, stalled } = watch(1000);
    w.start();
    for (let i = 0; i < 20; i++) {
      vi.advanceTimersByTime(900);
      res.writableLength -= 10;
    }
    expect(stalled()).toBe(0);
    vi.advanceTimersByTime(2100);
    expect(stalled()).toBe(1);
  });

  it("stops on drain, and 0 means no limit", () => {
    const a = watch(1000);
    a.w.start();
    vi.advanceTimersByTime(500);
    a.w.stop();
    vi.advanceTimersByTime(5000);
    expect(a.stalled()).toBe(0);
    const b = watch(0);
    b.w.start();
    vi.advanceTimersByTime(60_000);
    expect(b.stalled()).toBe(0);
  });
});
