/**
 * The simulated engine's priority scheduling as each engine does it: the waiting queue is ordered
 * by priority in the engine's own direction; vLLM's v1 scheduler (--scheduling-policy priority)
 * never preempts a running request for a waiting one, SGLang (--enable-priority-scheduling)
 * preempts only past --priority-scheduling-preemption-threshold, when the batch is full, and only
 * as many running requests as the waiting one needs (python/sglang/srt/managers/
 * schedule_policy.py, PrefillAdder.preempt_to_schedule).
 */
import { describe, expect, it } from "vitest";
import { Engine, type EngineOptions } from "../../sim/engine.js";
import { PrefixKvCache } from "../../sim/kv-cache.js";
import { ManualClock } from "../../sim/manual-clock.js";
import { DEFAULT_TIMING } from "../../sim/timing.js";

const VLLM = { priorityOrder: "lower-first" } as const;
/** SGLang with its default threshold (10). */
const SGLANG = { priorityOrder: "higher-first", preemptionThreshold: 10 } as const;

function setup(
  priority: Partial<EngineOptions>,
  { maxRunning = 1, kvTokens = 100_000 }: { maxRunning?: number; kvTokens?: number } = {},
) {
  const clock = new ManualClock();
  const kv = new PrefixKvCache({ capacityTokens: kvTokens, blockSize: 16 });
  const engine = new Engine(
    { timing: DEFAULT_TIMING, maxRunning, maxBatchTokens: 8192, delayFactor: () => 1, ...priority },
    kv,
    clock,
  );
  const firstTokens: string[] = [];
  const finished: string[] = [];
  const admits: string[] = [];
  const submit = (name: string, priority: number, maxTokens = 4, promptLength = 32) =>
    engine.submit({
      promptTokens: Array.from(
        { length: promptLength },
        (_, i) => (name.charCodeAt(0) * 100 + i) % 50_000,
      ),
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
    const e = setup({});
    e.submit("a", 0);
    e.submit("b", 5);
    e.submit("c", -5);
    e.clock.runAll();
    expect(e.firstTokens).toEqual(["a", "b", "c"]);
  });

  it("vLLM: a lower value waits less, but never preempts a running one (the slot frees first)", () => {
    const e = setup(VLLM);
    const a = e.submit("a", 5, 50); // running, long
    e.submit("b", 3);
    e.submit("c", 0);
    e.clock.fireNext();
    expect(a.state).toBe("running");
    e.clock.runAll();
    // c (0) goes before b (3), but only when a (5) has ended: vLLM's waiting loop stops at
    // max_num_seqs (vllm/v1/core/sched/scheduler.py).
    expect(e.firstTokens).toEqual(["a", "c", "b"]);
    expect(e.finished).toEqual(["a", "c", "b"]);
    expect(e.admits).toEqual(["a", "c", "b"]);
  });

  it("SGLang: a gap of exactly the threshold does not preempt", () => {
    const e = setup(SGLANG);
    e.submit("a", -5, 50);
    e.submit("c", 5); // 5 - (-5) = 10, not above 10
    e.clock.runAll();
    expect(e.finished).toEqual(["a", "c"]);
  });

  it("SGLang: a gap above the threshold preempts; the preempted one resumes with every token", () => {
    const e = setup(SGLANG);
    e.submit("a", -5, 50);
    e.submit("b", 1);
    e.submit("c", 6); // 6 - (-5) = 11 > 10: preempts a; b (1 - (-5) = 6) does not
    e.clock.runAll();
    expect(e.firstTokens).toEqual(["a", "c", "b"]);
    expect(e.finished).toEqual(["c", "b", "a"]);
    // A preempted sequence is admitted (told) once and still produces every token.
    expect(e.admits).toEqual(["a", "c", "b"]);
  });

  it("SGLang: a preempted sequence recomputes its prompt and its output so far when it resumes", () => {
    let prefilled = 0;
    const e = setup({
      ...SGLANG,
      onStep: (_start, _ms, shape) => (prefilled += shape.prefillTokens),
    });
    const a = e.submit("a", -20, 50);
    for (let step = 0; step < 20; step++) e.clock.fireNext(); // a's prefill, then 19 decode steps
    e.submit("h", 0);
    e.clock.fireNext(); // the step already planned (a decodes), then h's: a preempted
    expect(a.state).toBe("waiting");
    const output = a.generated;
    expect(output).toBe(21);
    e.clock.runAll();
    expect(e.finished).toEqual(["h", "a"]);
    expect(a.generated).toBe(50);
    // a's 32 prompt tokens, h's 32, then a's prompt (cached: 2 full blocks) and output again.
    expect(prefilled).toBe(32 + 32 + output);
  });

  it("SGLang with a threshold of 0: any higher value preempts, an equal one does not", () => {
    const e = setup({ ...SGLANG, preemptionThreshold: 0 });
    e.submit("a", 1, 50);
    e.submit("b", 1);
    e.submit("c", 2);
    e.clock.runAll();
    // a goes back to the queue behind b, as SGLang requeues it (a new wait_queue_entry_time).
    expect(e.finished).toEqual(["c", "b", "a"]);
  });

  it("SGLang: preempts only as many as needed, the least urgent and latest first", () => {
    const e = setup(SGLANG, { maxRunning: 3 });
    const low = e.submit("l", -20, 200);
    const mid = e.submit("n", -15, 200);
    e.clock.fireNext();
    const lowLater = e.submit("m", -20, 200); // same priority as l, queued later
    e.clock.fireNext();
    expect(e.engine.running).toBe(3);
    const high = e.submit("h", 0);
    e.clock.fireNext();
    // A full batch by slots; the KV pool has room: one slot is all h needs.
    expect(high.state).toBe("running");
    expect(lowLater.state).toBe("waiting");
    expect([low.state, mid.state]).toEqual(["running", "running"]);
  });

  it("SGLang: preempts more when the waiting one needs their KV, none when they cannot free enough", () => {
    // 6 blocks of 16 tokens; each low one holds 3 (32 prompt + 16 output), h needs 5 (32 + 48).
    const e = setup(SGLANG, { maxRunning: 2, kvTokens: 96 });
    const a = e.submit("a", -20, 16);
    const b = e.submit("b", -20, 16);
    e.clock.fireNext();
    const h = e.submit("h", 0, 48);
    e.clock.fireNext();
    expect([h.state, a.state, b.state]).toEqual(["running", "waiting", "waiting"]);

    // One of the two is within the threshold (gap 5): the other alone cannot free 5 blocks.
    const f = setup(SGLANG, { maxRunning: 2, kvTokens: 96 });
    const x = f.submit("x", -20, 16);
    const y = f.submit("y", -5, 16);
    f.clock.fireNext();
    const g = f.submit("g", 0, 48);
    f.clock.fireNext();
    expect([g.state, x.state, y.state]).toEqual(["waiting", "running", "running"]);
  });

  it("SGLang: a chunked prefill under way is never preempted; a decoding request is", () => {
    // SGLang keeps its chunked request out of running_batch between chunks (scheduler.py), so
    // preempt_to_schedule never sees it; before, the simulator took it first (the latest queued).
    const e = setup({ ...SGLANG, prefillFirst: true, maxBatchTokens: 64 }, { maxRunning: 2 });
    const a = e.submit("a", -20, 200);
    e.clock.fireNext(); // a's prefill; a decodes next
    const c = e.submit("c", -20, 200, 100);
    e.clock.fireNext(); // a decoded; c's first chunk (64 of 100) is planned
    const h = e.submit("h", 0);
    // c's first chunk ran: its last 36 tokens go first in the next step, then h, for a's slot.
    e.clock.fireNext();
    expect(h.state).toBe("running");
    expect(a.state).toBe("waiting");
    expect(c.state).toBe("running");
  });

  it("SGLang: equal priorities keep arrival order and never preempt", () => {
    const e = setup({ ...SGLANG, preemptionThreshold: 0 });
    e.submit("a", 1, 20);
    e.submit("b", 1);
    e.submit("c", 1);
    e.clock.runAll();
    expect(e.finished).toEqual(["a", "b", "c"]);
  });

  it("rejects a negative threshold", () => {
    expect(() => setup({ ...SGLANG, preemptionThreshold: -1 })).toThrow(/preemptionThreshold/);
  });
});
