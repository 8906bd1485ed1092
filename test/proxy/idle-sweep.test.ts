import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { type IdleEntry, IdleSweep } from "../../src/proxy/idle-sweep.js";

function entry(onIdle: () => boolean = () => true): IdleEntry & { idled: number } {
  const e = {
    stirred: false,
    quietSince: 0,
    idled: 0,
    onIdle: () => {
      e.idled++;
      return onIdle();
    },
  };
  return e;
}

describe("IdleSweep: one timer for every stream's idle limit", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it("ends a silent stream after the limit, never before, and not one that keeps sending", () => {
    const sweep = new IdleSweep(800);
    const silent = entry();
    const busy = entry();
    sweep.add(silent);
    sweep.add(busy);
    for (let t = 0; t < 790; t += 10) {
      busy.stirred = true;
      vi.advanceTimersByTime(10);
    }
    expect(silent.idled).toBe(0);
    for (let t = 0; t < 400; t += 10) {
      busy.stirred = true;
      vi.advanceTimersByTime(10);
    }
    expect(silent.idled).toBe(1);
    expect(busy.idled).toBe(0);
    // Given up once: the sweep lets it go.
    expect(sweep.size).toBe(1);
  });

  it("keeps waiting when the stream says so (a client not reading), and asks again a limit later", () => {
    const sweep = new IdleSweep(800);
    const held = entry(() => false);
    sweep.add(held);
    vi.advanceTimersByTime(1000);
    expect(held.idled).toBe(1);
    vi.advanceTimersByTime(500);
    expect(held.idled).toBe(1);
    vi.advanceTimersByTime(200);
    expect(held.idled).toBe(2);
  });

  it("runs its timer only while a stream is watched", () => {
    const sweep = new IdleSweep(800);
    const a = entry();
    sweep.add(a);
    expect(vi.getTimerCount()).toBe(1);
    sweep.delete(a);
    expect(vi.getTimerCount()).toBe(0);
    expect(sweep.size).toBe(0);
  });
});
