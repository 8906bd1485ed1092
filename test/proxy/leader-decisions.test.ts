import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { signPeerCall, verifyPeerCall } from "../../src/proxy/leader-decisions.js";
import { completionRecord } from "../../src/routes/relay-call.js";
import { StateSecret } from "../../src/state/state-secret.js";

const secret = new StateSecret("the fleet's secret, long enough");

describe("a replica's calls to the leader", () => {
  it("are taken only signed with the fleet's secret, for their own call and request, and fresh", () => {
    const now = 1_800_000_000_000;
    const signed = signPeerCall(secret, "complete", "req-1", now);
    expect(verifyPeerCall(secret, "complete", "req-1", signed, now)).toBe(true);
    expect(verifyPeerCall(secret, "complete", "req-1", signed, now + 59_000)).toBe(true);
    // Another call, another request, another secret, too old or from too far ahead: refused.
    expect(verifyPeerCall(secret, "decide", "req-1", signed, now)).toBe(false);
    expect(verifyPeerCall(secret, "complete", "req-2", signed, now)).toBe(false);
    const other = new StateSecret("another fleet's secret, long enough");
    expect(verifyPeerCall(other, "complete", "req-1", signed, now)).toBe(false);
    expect(verifyPeerCall(secret, "complete", "req-1", signed, now + 61_000)).toBe(false);
    expect(verifyPeerCall(secret, "complete", "req-1", signed, now - 61_000)).toBe(false);
    // The time is signed too: moving it forward breaks the signature.
    const moved = `${now + 1000}${signed.slice(signed.indexOf("."))}`;
    expect(verifyPeerCall(secret, "complete", "req-1", moved, now)).toBe(false);
    for (const bad of [undefined, "", ".", "abc", `${now}`, `${now}.`, ["a", "b"]])
      expect(verifyPeerCall(secret, "complete", "req-1", bad, now)).toBe(false);
  });

  it("never throws on any header value", () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (id, value) => {
        expect(verifyPeerCall(secret, "retry", id, value)).toBe(false);
      }),
    );
  });
});

describe("a replica's completion record", () => {
  it("reads status, the worker's status, its header time and the engine's token counts", () => {
    expect(
      completionRecord(
        {
          status: 200,
          upstream_status: 200,
          header_ms: 12,
          prompt_tokens: 4000,
          cached_tokens: 3000,
          completion_tokens: 8,
        },
        "req-1",
      ),
    ).toEqual({
      key: "req-1",
      status: 200,
      upstreamStatus: 200,
      headerMs: 12,
      usage: { promptTokens: 4000, cachedTokens: 3000, completionTokens: 8 },
    });
    // The client gone before any worker answered: only a status.
    expect(completionRecord({ status: 499 }, "req-2")).toEqual({
      key: "req-2",
      status: 499,
      upstreamStatus: undefined,
      headerMs: undefined,
      usage: undefined,
    });
  });

  it("carries a Responses answer's id only in the engines' shape", () => {
    expect(completionRecord({ status: 200, response_id: "resp_abc-1" }, "r")?.responseId).toBe(
      "resp_abc-1",
    );
    for (const bad of ["abc", "resp", `resp_${"x".repeat(201)}`, "resp_a b", 7])
      expect(completionRecord({ status: 200, response_id: bad }, "r")?.responseId).toBeUndefined();
  });

  it("is refused when it is not one, and drops fields that are not counts", () => {
    for (const bad of [null, [], "200", 200, {}, { status: 99 }, { status: 600 }, { status: 2.5 }])
      expect(completionRecord(bad, "req-1")).toBeUndefined();
    expect(completionRecord({ status: 200 }, "")).toBeUndefined();
    const record = completionRecord(
      { status: 200, upstream_status: 7, header_ms: -1, prompt_tokens: "5", cached_tokens: 1 },
      "req-1",
    );
    expect(record).toEqual({
      key: "req-1",
      status: 200,
      upstreamStatus: undefined,
      headerMs: undefined,
      usage: undefined,
    });
  });

  it("never throws, and what it reads is in bounds", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        const record = completionRecord(value, "req");
        if (record === undefined) return;
        expect(record.status).toBeGreaterThanOrEqual(100);
        expect(record.status).toBeLessThanOrEqual(599);
        if (record.usage !== undefined)
          expect(Number.isInteger(record.usage.promptTokens)).toBe(true);
      }),
    );
  });
});
