import { afterEach, describe, expect, it, vi } from "vitest";
import { spreadOver } from "../../src/workers/probe-slots.js";

describe("spreadOver: a pass over many workers is a trickle, not a burst", () => {
  afterEach(() => vi.useRealTimers());

  it("starts 64 at a time, evenly over the span, and ends when every one has ended", async () => {
    vi.useFakeTimers();
    const items = Array.from({ length: 300 }, (_, i) => i);
    let started = 0;
    let ended = 0;
    let done = false;
    const pass = spreadOver(items, 1000, async () => {
      started++;
      await Promise.resolve();
      ended++;
    }).then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(0);
    expect(started).toBe(64);
    // Five batches over 1,000 ms: one every 200 ms.
    await vi.advanceTimersByTimeAsync(199);
    expect(started).toBe(64);
    await vi.advanceTimersByTimeAsync(1);
    expect(started).toBe(128);
    await vi.advanceTimersByTimeAsync(600);
    expect(started).toBe(300);
    await pass;
    expect(done).toBe(true);
    expect(ended).toBe(300);
  });

  it("a fleet of one batch starts at once; a stopped pass starts no more", async () => {
    let started = 0;
    await spreadOver([1, 2, 3], 60_000, async () => {
      started++;
    });
    expect(started).toBe(3);
    vi.useFakeTimers();
    let stopped = false;
    started = 0;
    const pass = spreadOver(
      Array.from({ length: 200 }, (_, i) => i),
      1000,
      async () => {
        started++;
      },
      () => stopped,
    );
    await vi.advanceTimersByTimeAsync(0);
    stopped = true;
    await vi.advanceTimersByTimeAsync(1000);
    await pass;
    expect(started).toBe(64);
  });
});
