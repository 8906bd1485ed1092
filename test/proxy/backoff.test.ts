import { describe, expect, it } from "vitest";
import { backoffMs, retryAfterMs } from "../../src/proxy/backoff.js";

describe("backoff", () => {
  it("doubles the ceiling each retry, capped, with full jitter", () => {
    expect(backoffMs(1, 50, 5000, () => 1)).toBe(50);
    expect(backoffMs(2, 50, 5000, () => 1)).toBe(100);
    expect(backoffMs(3, 50, 5000, () => 1)).toBe(200);
    expect(backoffMs(20, 50, 5000, () => 1)).toBe(5000);
    expect(backoffMs(3, 50, 5000, () => 0)).toBe(0);
    expect(backoffMs(3, 50, 5000, () => 0.5)).toBe(100);
  });

  it("reads Retry-After as seconds or an HTTP date", () => {
    expect(retryAfterMs("2")).toBe(2000);
    expect(retryAfterMs("0.5")).toBe(500);
    expect(retryAfterMs(undefined)).toBeUndefined();
    expect(retryAfterMs("soon")).toBeUndefined();
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterMs("Thu, 01 Jan 2026 00:00:03 GMT", now)).toBe(3000);
  });
});
