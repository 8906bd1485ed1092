import { describe, expect, it } from "vitest";
import { CharsPerToken, DEFAULT_CHARS_PER_TOKEN } from "../../src/workers/chars-per-token.js";

describe("CharsPerToken", () => {
  it("is 4 until a usable sample arrives", () => {
    const estimate = new CharsPerToken();
    expect(estimate.value).toBe(DEFAULT_CHARS_PER_TOKEN);
    expect(estimate.observe(40, 5)).toBe(false); // too few tokens: mostly template
    expect(estimate.observe(0, 100)).toBe(false); // no routing text
    expect(estimate.observe(10_000, 100)).toBe(false); // 100 chars per token: not this text
    expect(estimate.value).toBe(DEFAULT_CHARS_PER_TOKEN);
    expect(estimate.samples).toBe(0);
  });

  it("learns the ratio, long prompts weighing more", () => {
    const estimate = new CharsPerToken();
    estimate.observe(3000, 1000);
    expect(estimate.value).toBeCloseTo(3, 5);
    estimate.observe(100, 20); // 5 chars per token, but a short prompt
    expect(estimate.value).toBeGreaterThan(3);
    expect(estimate.value).toBeLessThan(3.1);
  });

  it("follows a change of workload", () => {
    const estimate = new CharsPerToken();
    for (let i = 0; i < 50; i++) estimate.observe(4000, 1000);
    for (let i = 0; i < 300; i++) estimate.observe(2000, 1000);
    expect(estimate.value).toBeCloseTo(2, 1);
  });
});
