import { describe, expect, it } from "vitest";
import { CircuitBreaker } from "../../src/workers/breaker.js";

function breaker(failureThreshold = 3, openMs = 1000) {
  let now = 0;
  const b = new CircuitBreaker({ failureThreshold, openMs, successThreshold: 2, now: () => now });
  return { b, advance: (ms: number) => (now += ms) };
}

describe("CircuitBreaker", () => {
  it("opens after the threshold of consecutive failures", () => {
    const { b } = breaker(3);
    b.onFailure();
    b.onFailure();
    expect(b.state).toBe("closed");
    b.onFailure();
    expect(b.state).toBe("open");
    expect(b.admits()).toBe(false);
  });

  it("a success resets the consecutive count", () => {
    const { b } = breaker(3);
    b.onFailure();
    b.onFailure();
    b.onSuccess();
    b.onFailure();
    b.onFailure();
    expect(b.state).toBe("closed");
  });

  it("half-opens after the timeout and admits one trial at a time", () => {
    const { b, advance } = breaker(1, 1000);
    b.onFailure();
    advance(999);
    expect(b.admits()).toBe(false);
    advance(1);
    expect(b.state).toBe("half_open");
    expect(b.admits()).toBe(true);
    b.onDispatch();
    expect(b.admits()).toBe(false);
  });

  it("closes after 2 trial successes", () => {
    const { b, advance } = breaker(1, 10);
    b.onFailure();
    advance(10);
    b.onDispatch();
    b.onSuccess();
    expect(b.state).toBe("half_open");
    b.onDispatch();
    b.onSuccess();
    expect(b.state).toBe("closed");
  });

  it("a failed trial reopens the circuit", () => {
    const { b, advance } = breaker(1, 10);
    b.onFailure();
    advance(10);
    b.onDispatch();
    b.onFailure();
    expect(b.state).toBe("open");
  });

  it("a neutral outcome (4xx, client abort) frees the trial slot without closing", () => {
    const { b, advance } = breaker(1, 10);
    b.onFailure();
    advance(10);
    b.onDispatch();
    b.onNeutral();
    expect(b.state).toBe("half_open");
    expect(b.admits()).toBe(true);
  });
});
