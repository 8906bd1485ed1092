import { describe, expect, it } from "vitest";
import { engineHeldChars } from "../../src/proxy/usage-feedback.js";

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
