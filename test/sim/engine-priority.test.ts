/**
 * The simulated engine's priority scheduling (vLLM --scheduling-policy priority, SGLang
 * --enable-priority-scheduling): the waiting queue is ordered by priority in the engine's own
 * direction, and a more urgent waiting sequence preempts the least urgent running one.
 */
import { describe, expect, it } from "vitest";
import { Engine } from "../../sim/engine.js";
import { PrefixKvCache } from "../../sim/kv-cache.js";
import { ManualClock } from "../../sim/manual-clock.js";
import type { PriorityOrder } from "../../sim/priority-order.js";
import { DEFAULT_TIMING } from "../../sim/timing.js";

function setup(priorityOrder: PriorityOrder | undefined) {
  const clock = new ManualClock();
  const kv = new PrefixKvCache({ capacityTokens: 100_000, blockSize: 16 });
  const engine = new Engine(
    {
      timing: DEFAULT_TIMING,
      maxRunning: 1,
      maxBatchTokens: 8192,
      delayFactor: () => 1,
      ...(priorityOrder === undefined ? {} : { priorityOrder }),
    },
    kv,
    clock,
  );
  const firstTokens: string[] = [];
  const finished: string[] = [];
  const admits: string[] = [];
  const submit = (name: string, priority: number, maxTokens = 4) =>
    engine.submit({
      promptTokens: Array.from({ length: 32 }, (_, i) => (name.charCodeAt(0) * 100 + i) % 50_000),
      maxTokens,
      priority,
      sink: {
        onAdmit: () => admits.push(name),
        onToken: (i) => {
          if (i === 0) firstTokens.push(name);
        },
        onFinish: () => finished.push(name),
      },
    });
  return { clock, engine, submit, firstTokens, finished, admits };
}

describe("the simulated engine's priority scheduling", () => {
  it("first come, first served without it (the priority field is ignored)", () => {
    const e = setup(undefined);
    e.submit("a", 0);
    e.submit("b", 5);
    e.submit("c", -5);
    e.clock.runAll();
    expect(e.firstTokens).toEqual(["a", "b", "c"]);
  });

  it("vLLM: a lower value waits less, and preempts a running one of a higher value", () => {
    const e = setup("lower-first");
    e.submit("a", 5, 50); // running, long
    e.submit("b", 3);
    e.submit("c", 0);
    e.clock.runAll();
    // c (0) preempts a (5) at once, then b (3) takes the slot before a resumes.
    expect(e.firstTokens).toEqual(["a", "c", "b"]);
    expect(e.finished).toEqual(["c", "b", "a"]);
    // A preempted sequence is admitted (told) once and still produces every token.
    expect(e.admits).toEqual(["a", "c", "b"]);
  });

  it("SGLang: a higher value goes first", () => {
    const e = setup("higher-first");
    e.submit("a", -5, 50);
    e.submit("b", 1);
    e.submit("c", 7);
    e.clock.runAll();
    expect(e.finished).toEqual(["c", "b", "a"]);
  });

  it("equal priorities keep arrival order and never preempt", () => {
    const e = setup("lower-first");
    e.submit("a", 1, 20);
    e.submit("b", 1);
    e.submit("c", 1);
    e.clock.runAll();
    expect(e.finished).toEqual(["a", "b", "c"]);
  });
});
