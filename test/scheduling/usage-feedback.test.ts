import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { engineHeldChars, UsageFeedback } from "../../src/scheduling/usage-feedback.js";
import { CharsPerToken } from "../../src/workers/chars-per-token.js";
import { RunningReserve } from "../../src/workers/running-reserve.js";
import type { Worker } from "../../src/workers/worker.js";

describe("engineHeldChars", () => {
  it("is the engine's cached tokens in characters when clearly below the index's claim", () => {
    // The index claimed 8000 characters; the engine had 100 tokens (400 characters) cached.
    expect(engineHeldChars(8000, 100, 2500, 10_000, 4)).toBe(400);
    // Rounded up: the index keeps more rather than less.
    expect(engineHeldChars(8000, 100, 2500, 10_000, 3.3)).toBe(330);
  });

  it("leaves small gaps alone (pages, the recomputed last token, template tokens)", () => {
    // 40 tokens short of the claim: under 64 tokens of slack.
    expect(engineHeldChars(8000, 1960, 2500, 10_000, 4)).toBeUndefined();
    // Over 64 tokens short but under 20% of a long claim.
    expect(engineHeldChars(40_000, 9000, 12_000, 48_000, 4)).toBeUndefined();
  });

  it("has nothing to correct without a claim, or when everything was cached", () => {
    expect(engineHeldChars(0, 0, 2500, 10_000, 4)).toBeUndefined();
    expect(engineHeldChars(8000, 2500, 2500, 10_000, 4)).toBeUndefined();
    expect(engineHeldChars(8000, 0, 0, 10_000, 4)).toBeUndefined();
  });

  it("never keeps more than the text", () => {
    expect(engineHeldChars(9000, 100, 2500, 300, 4)).toBe(300);
  });
});

describe("UsageFeedback.apply", () => {
  const SYSTEM = "You are a support agent for a large shop; be brief. ".repeat(40);

  function setup() {
    const index = new ApproximateIndex();
    index.addWorker("w");
    const decider = new Scheduler(createPolicy("cache_aware"), index);
    const worker = {
      id: "w",
      inFlight: 0,
      feedbackCorrections: 0,
      charsPerTokenEstimate: new CharsPerToken(),
      running: new RunningReserve(),
      learnCharsPerToken(chars: number, tokens: number) {
        this.charsPerTokenEstimate.observe(chars, tokens);
      },
      noteFeedbackCorrection() {
        this.feedbackCorrections += 1;
      },
      get charsPerToken() {
        return this.charsPerTokenEstimate.value;
      },
    };
    const corrections: number[] = [];
    const feedback = new UsageFeedback({
      onEngineTokens: () => {},
      onCorrection: (_, chars) => corrections.push(chars),
    });
    index.insert("w", undefined, `${SYSTEM}an older conversation`);
    const request = { text: `${SYSTEM}the new question` };
    const decision = decider.decide([worker], request)!;
    const apply = (othersPrefilling: boolean) =>
      feedback.apply(
        worker as unknown as Worker,
        { promptTokens: Math.ceil(request.text.length / 4), cachedTokens: 0, completionTokens: 50 },
        decision,
        request,
        decider,
        { aboutText: true, othersPrefilling },
      );
    return { index, worker, corrections, apply };
  }

  it("trims the index when the engine reports far fewer cached tokens", () => {
    const { index, worker, corrections, apply } = setup();
    apply(false);
    expect(worker.feedbackCorrections).toBe(1);
    expect(corrections[0]).toBe("an older conversation".length);
    expect(index.treeOf("w")!.match(`${SYSTEM}an older conversation`)).toBe(SYSTEM.length);
  });

  it("learns what the worker's requests generate (the room running requests take)", () => {
    const { worker, apply } = setup();
    expect(worker.running.outputTokens).toBe(0);
    apply(false);
    expect(worker.running.outputTokens).toBe(50);
  });

  it("does not when other requests were still prefilling there (a burst, not an eviction)", () => {
    const { index, worker, corrections, apply } = setup();
    apply(true);
    expect(worker.feedbackCorrections).toBe(0);
    expect(corrections).toEqual([]);
    const older = `${SYSTEM}an older conversation`;
    expect(index.treeOf("w")!.match(older)).toBe(older.length);
  });
});
