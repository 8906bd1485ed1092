import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { SETTINGS } from "../../src/config.js";
import { ERROR_CATALOG } from "../../src/errors.js";

const DOC = readFileSync(new URL("../../docs/reliability.md", import.meta.url), "utf8");
const byFlag = new Map<string, unknown>(SETTINGS.map((s) => [s.flag, s.default]));

/** The settings docs/reliability.md must state with their defaults. */
const RELIABILITY_FLAGS = [
  "--health-check-interval-secs",
  "--health-check-timeout-secs",
  "--health-failure-threshold",
  "--health-success-threshold",
  "--cb-failure-threshold",
  "--cb-timeout-secs",
  "--retry-max-attempts",
  "--retry-initial-backoff-ms",
  "--retry-max-backoff-ms",
  "--connect-timeout-secs",
  "--worker-max-connections",
  "--first-byte-timeout-secs",
  "--stream-first-byte-timeout-secs",
  "--max-cool-down-secs",
  "--allow-link-local-workers",
  "--kv-events-max-message-bytes",
  "--kv-index-max-blocks",
  "--idle-timeout-secs",
  "--request-timeout-secs",
  "--max-payload-size",
  "--max-body-buffer-bytes",
  "--max-body-buffer-bytes-per-client",
  "--large-body-bytes",
  "--max-large-body-reads",
  "--large-body-wait-secs",
  "--body-read-timeout-secs",
  "--body-idle-timeout-secs",
  "--body-min-rate-bytes",
  "--body-linger-secs",
  "--body-linger-bytes",
  "--parse-offload-bytes",
  "--parse-workers",
  "--parse-worker-memory-mb",
  "--max-routing-text-chars",
  "--max-concurrent-requests",
  "--queue-size",
  "--queue-timeout-secs",
  "--shutdown-grace-secs",
  "--cb-success-threshold",
  "--client-stall-secs",
  "--max-queued-per-tenant",
  "--max-tenants",
  "--max-tree-size",
  "--eviction-interval",
  "--block-hash-capacity",
  "--max-sessions",
  "--max-response-ids",
  "--response-id-ttl-secs",
  "--engine-poll-timeout-secs",
  "--dns-timeout-secs",
  "--discovery-grace-secs",
  "--kv-events-replay-timeout-ms",
  "--kv-events-rebuild-secs",
  "--kv-speculative-ttl-ms",
  "--tokenize-timeout-ms",
  "--tokenizer-cache-tokens",
  "--state-max-text-chars",
  "--state-stream-length",
  "--state-queue-size",
  "--state-claim-timeout-ms",
  "--state-claim-ttl-ms",
  "--state-max-op-age-ms",
  "--cache-account-window-mins",
  "--cache-account-top-prefixes",
];

describe("docs/reliability.md matches the code", () => {
  // Tables may be padded by the formatter: the patterns allow any spacing inside cells.
  it("the defaults table states every reliability setting with its default from SETTINGS", () => {
    const rows = [...DOC.matchAll(/^\|\s*`(--[\w-]+)`\s*\|\s*`([^`]*)`\s*\|/gm)];
    const documented = new Map(rows.map((m) => [m[1]!, m[2]!]));
    expect([...documented.keys()].sort()).toEqual([...RELIABILITY_FLAGS].sort());
    for (const [flag, value] of documented) {
      expect(byFlag.has(flag), flag).toBe(true);
      expect(value, flag).toBe(String(byFlag.get(flag)));
    }
  });

  it("defaults quoted in prose tables, like `--idle-timeout-secs` (120), are SETTINGS' defaults", () => {
    const quoted = [...DOC.matchAll(/`(--[\w-]+)` \((\d+(?:\.\d+)?)\)/g)];
    expect(quoted.length).toBeGreaterThanOrEqual(4);
    for (const m of quoted) expect(m[2], m[1]).toBe(String(byFlag.get(m[1]!)));
  });

  it("the error catalog table lists every code with its status and type", () => {
    const rows = [...DOC.matchAll(/^\|\s*`(\w+)`\s*\|\s*(\d{3})\s*\|\s*`(\w+)`\s*\|/gm)];
    const documented = new Map(rows.map((m) => [m[1]!, { status: Number(m[2]), type: m[3]! }]));
    expect([...documented.keys()].sort()).toEqual(Object.keys(ERROR_CATALOG).sort());
    for (const [code, entry] of Object.entries(ERROR_CATALOG)) {
      expect(documented.get(code), code).toEqual({ status: entry.status, type: entry.type });
    }
  });
});
