/**
 * The simulated worker's priority scheduling per flavor (sim/dp-ranks.ts): SGLang preempts past
 * its threshold (sim option prioritySchedulingPreemptionThreshold, default 10, unless
 * disablePriorityPreemption), vLLM never preempts a running request for a waiting one.
 */
import { describe, expect, it } from "vitest";
import { makeRanks } from "../../sim/dp-ranks.js";
import { ManualClock } from "../../sim/manual-clock.js";
import { resolveOptions, type SimWorkerOptions } from "../../sim/options.js";

/** One running request of priority `low`, then one of `high`: whether `high` preempted it. */
function preempts(options: SimWorkerOptions, low: number, high: number): boolean {
  const clock = new ManualClock();
  const resolved = resolveOptions({ maxRunning: 1, priorityScheduling: true, ...options });
  const [rank] = makeRanks(1, resolved, [], clock, () => 1);
  const engine = rank!.engine;
  const submit = (priority: number, maxTokens: number) =>
    engine.submit({
      promptTokens: Array.from({ length: 32 }, (_, i) => priority * 1000 + i + 100),
      maxTokens,
      priority,
      sink: { onToken: () => {}, onFinish: () => {} },
    });
  const running = submit(low, 100);
  clock.fireNext();
  const waiting = submit(high, 4);
  clock.fireNext();
  expect(waiting.state === "running").toBe(running.state === "waiting");
  return running.state === "waiting";
}

describe("the simulated worker's priority scheduling per flavor", () => {
  it("SGLang: the default threshold of 10 (a gap of 10 does not preempt, 11 does)", () => {
    expect(preempts({ flavor: "sglang" }, 0, 10)).toBe(false);
    expect(preempts({ flavor: "sglang" }, 0, 11)).toBe(true);
  });

  it("SGLang: the threshold is the sim option's; --disable-priority-preemption turns it off", () => {
    expect(preempts({ flavor: "sglang", prioritySchedulingPreemptionThreshold: 0 }, 0, 1)).toBe(
      true,
    );
    expect(preempts({ flavor: "sglang", disablePriorityPreemption: true }, 0, 100)).toBe(false);
  });

  it("vLLM: never preempts for a waiting request, whatever the gap (lower value first)", () => {
    expect(preempts({ flavor: "vllm" }, 100, 0)).toBe(false);
    expect(preempts({ flavor: "vllm", prioritySchedulingPreemptionThreshold: 0 }, 1, 0)).toBe(
      false,
    );
  });

  it("rejects a negative threshold", () => {
    expect(() => resolveOptions({ prioritySchedulingPreemptionThreshold: -1 })).toThrow(
      /prioritySchedulingPreemptionThreshold/,
    );
  });
});
