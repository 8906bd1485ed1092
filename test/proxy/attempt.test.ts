import { afterEach, describe, expect, it, vi } from "vitest";
import { ClientAbort, FirstByteTimeout, RequestTimeout } from "../../src/proxy/abort-reasons.js";
import { Attempt, type AttemptPlan } from "../../src/proxy/attempt.js";
import { Cancel } from "../../src/proxy/cancel.js";
import { FAILED, NEUTRAL } from "../../src/workers/lease.js";
import { Worker } from "../../src/workers/worker.js";

const workers: Worker[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const w of workers.splice(0)) await w.pool.close();
});

function plan(overrides: Partial<AttemptPlan> = {}): AttemptPlan {
  const worker = new Worker("w", "http://127.0.0.1:9", {
    breaker: { failureThreshold: 3, openMs: 60_000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
  workers.push(worker);
  return {
    worker,
    load: { textChars: 40, uncachedChars: 30, rank: 1 },
    requestId: "r",
    startedAt: Date.now(),
    deadline: Date.now() + 60_000,
    firstByteMs: 30_000,
    stream: false,
    clientSignal: new Cancel(),
    route: "prefix",
    limits: { idleTimeoutMs: 1000, clientStallMs: 0 },
    readUsage: false,
    onUpstreamError: () => {},
    ...overrides,
  };
}

describe("Attempt", () => {
  it("holds the worker's lease until end(), and a second end() changes nothing", () => {
    const p = plan();
    const attempt = new Attempt(p);
    expect(p.worker.ownInFlight).toBe(1);
    expect(p.worker.rankInFlight[1]).toBe(1);
    expect(p.worker.pendingPrefillChars).toBe(30);
    expect(p.clientSignal.listenerCount("abort")).toBe(1);
    attempt.end(NEUTRAL);
    attempt.end(FAILED);
    expect(p.worker.ownInFlight).toBe(0);
    expect(p.worker.rankInFlight[1]).toBe(0);
    expect(p.worker.pendingPrefillChars).toBe(0);
    expect(p.worker.breaker.consecutiveFailures).toBe(0);
    expect(p.clientSignal.listenerCount("abort")).toBe(0);
  });

  it("a client that goes away aborts it with ClientAbort; after end() it no longer listens", () => {
    const p = plan();
    const attempt = new Attempt(p);
    p.clientSignal.abort();
    expect(attempt.controller.reason).toBeInstanceOf(ClientAbort);
    attempt.end(NEUTRAL);

    const q = plan();
    const ended = new Attempt(q);
    ended.end(NEUTRAL);
    q.clientSignal.abort();
    expect(ended.controller.aborted).toBe(false);
  });

  it("the first-byte timer aborts it, unless the headers arrived; the request timer bounds the rest", () => {
    vi.useFakeTimers();
    const slow = new Attempt(plan({ firstByteMs: 100, stream: true }));
    vi.advanceTimersByTime(100);
    expect(slow.controller.reason).toBeInstanceOf(FirstByteTimeout);
    expect((slow.controller.reason as FirstByteTimeout).stream).toBe(true);
    slow.end(FAILED);

    const answered = new Attempt(plan({ firstByteMs: 100, deadline: Date.now() + 500 }));
    answered.headersArrived();
    vi.advanceTimersByTime(499);
    expect(answered.controller.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(answered.controller.reason).toBeInstanceOf(RequestTimeout);
    answered.end(NEUTRAL);

    const done = new Attempt(plan({ firstByteMs: 100, deadline: Date.now() + 500 }));
    done.end(NEUTRAL);
    vi.advanceTimersByTime(1000);
    expect(done.controller.aborted).toBe(false);
  });

  it("sets no first-byte timer when the sender bounds the first byte; the request timer stays", () => {
    vi.useFakeTimers();
    const before = vi.getTimerCount();
    const relayed = new Attempt(plan({ firstByteMs: undefined, deadline: Date.now() + 500 }));
    expect(vi.getTimerCount()).toBe(before + 1);
    vi.advanceTimersByTime(499);
    expect(relayed.controller.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(relayed.controller.reason).toBeInstanceOf(RequestTimeout);
    relayed.end(NEUTRAL);
    expect(vi.getTimerCount()).toBe(before);
  });
});
