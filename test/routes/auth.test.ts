import { describe, expect, it, vi } from "vitest";
import { adminAllowed, bearerMatches, isLoopback } from "../../src/routes/auth.js";

const hashes = vi.hoisted(() => ({ made: 0 }));
vi.mock("node:crypto", async (original) => {
  const real = await original<typeof import("node:crypto")>();
  return {
    ...real,
    createHash: (algorithm: string) => {
      hashes.made += 1;
      return real.createHash(algorithm);
    },
  };
});

describe("bearerMatches", () => {
  it("accepts the key, case-insensitive scheme and surrounding spaces, and refuses anything else", () => {
    expect(bearerMatches("Bearer k1", "k1")).toBe(true);
    expect(bearerMatches("  bearer   k1 ", "k1")).toBe(true);
    expect(bearerMatches("Bearer k2", "k1")).toBe(false);
    expect(bearerMatches("Bearer k1x", "k1")).toBe(false);
    expect(bearerMatches("Basic k1", "k1")).toBe(false);
    expect(bearerMatches("k1", "k1")).toBe(false);
    expect(bearerMatches(undefined, "k1")).toBe(false);
  });

  it("hashes the configured key once, not on every request: one hash per check", () => {
    bearerMatches("Bearer warm", "the-admin-key");
    const before = hashes.made;
    for (let i = 0; i < 5; i++)
      expect(bearerMatches("Bearer the-admin-key", "the-admin-key")).toBe(true);
    expect(hashes.made - before).toBe(5);
  });
});

describe("adminAllowed", () => {
  it("asks for the admin key when one is set, else a loopback peer", () => {
    expect(adminAllowed("a", "Bearer a", "10.0.0.1")).toBe(true);
    expect(adminAllowed("a", "Bearer b", "127.0.0.1")).toBe(false);
    expect(adminAllowed(undefined, undefined, "127.0.0.1")).toBe(true);
    expect(adminAllowed(undefined, undefined, "::ffff:127.0.0.1")).toBe(true);
    expect(adminAllowed(undefined, undefined, "172.17.0.1")).toBe(false);
    expect(isLoopback(undefined)).toBe(false);
  });
});
