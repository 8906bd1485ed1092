import { describe, expect, it, vi } from "vitest";
import { routeOptions } from "../../src/assembly/routes.js";
import { configWith } from "../../src/config.js";
import { adminAllowed, BearerKey, bearerKey, isLoopback } from "../../src/routes/auth.js";

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

const configured = new Map<string, BearerKey>();
/** The configured key's digest is made once, as routeOptions does. */
function bearerMatches(header: string | undefined, key: string): boolean {
  let digest = configured.get(key);
  if (digest === undefined) {
    digest = new BearerKey(key);
    configured.set(key, digest);
  }
  return digest.matches(header);
}

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

  it("the routes hold the configured keys as digests, hashed once when their settings are made", () => {
    const before = hashes.made;
    const options = routeOptions(configWith({ apiKey: "data-key", adminApiKey: "admin-key" }));
    expect(hashes.made - before).toBe(2);
    // Nothing of the routes' settings shows a key in clear (a dump, a debug page, a log line).
    expect(JSON.stringify(options)).not.toMatch(/data-key|admin-key/);
    // Any number of keys (one router per test, many routers in a process): no shared table.
    for (let i = 0; i < 20; i++) {
      const key = new BearerKey(`key-${i}`);
      const hashed = hashes.made;
      expect(key.matches(`Bearer key-${i}`)).toBe(true);
      expect(key.matches(`Bearer key-${i + 1}`)).toBe(false);
      expect(hashes.made - hashed).toBe(2);
    }
    expect(options.apiKey?.matches("Bearer data-key")).toBe(true);
    expect(adminAllowed(options.adminApiKey, "Bearer admin-key", "10.0.0.1")).toBe(true);
    expect(adminAllowed(options.adminApiKey, "Bearer data-key", "127.0.0.1")).toBe(false);
  });
});

describe("adminAllowed", () => {
  it("asks for the admin key when one is set, else a loopback peer", () => {
    expect(adminAllowed(bearerKey("a"), "Bearer a", "10.0.0.1")).toBe(true);
    expect(adminAllowed(bearerKey("a"), "Bearer b", "127.0.0.1")).toBe(false);
    expect(adminAllowed(undefined, undefined, "127.0.0.1")).toBe(true);
    expect(adminAllowed(undefined, undefined, "::ffff:127.0.0.1")).toBe(true);
    expect(adminAllowed(undefined, undefined, "172.17.0.1")).toBe(false);
    expect(isLoopback(undefined)).toBe(false);
  });
});
