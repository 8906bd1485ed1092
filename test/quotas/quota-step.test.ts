import { describe, expect, it } from "vitest";
import type { RequestIdentity } from "../../src/admission/identity.js";
import type { AdmissionRelease, AdmissionTicket } from "../../src/admission/step.js";
import { RouterError } from "../../src/errors.js";
import { Cancel } from "../../src/proxy/cancel.js";
import { LocalQuotaStore } from "../../src/quotas/local-quota-store.js";
import { parseQuotaFile } from "../../src/quotas/quota-file.js";
import { QuotaStep, tokensToCharge } from "../../src/quotas/quota-step.js";
import { WINDOW_MS } from "../../src/quotas/window.js";

function ticket(
  tenant: string,
  promptChars: number | undefined,
  maxTokens?: number,
): AdmissionTicket {
  return {
    identity: () => ({ tenant, priority: 0 }),
    candidates: () => [],
    cost: () => 1,
    promptChars: () => promptChars,
    maxTokens: () => maxTokens,
    timeoutMs: () => 1000,
    signal: new Cancel(),
  };
}

function setup(file: string) {
  let now = 100 * WINDOW_MS;
  const store = new LocalQuotaStore(() => now);
  const refusals: Array<[string, string]> = [];
  const step = new QuotaStep(parseQuotaFile(file), store, {
    charsPerToken: () => 4,
    refused: (identity: RequestIdentity, reason) => refusals.push([identity.tenant, reason]),
  });
  const enter = async (t: AdmissionTicket) => {
    const entered = step.enter(t);
    return typeof entered === "function" ? entered : await entered;
  };
  const tokens = (tenant: string) =>
    [...store.usage()].find(([name]) => name === tenant)?.[1] ?? { cur: 0, prev: 0, running: 0 };
  return { store, step, enter, refusals, tokens, advance: (ms: number) => (now += ms) };
}

describe("QuotaStep: tokens per minute", () => {
  it("charges the prompt's estimate, refuses past the limit with 429 and Retry-After, other tenants unaffected", async () => {
    const q = setup("tenants: {a: {tokens_per_minute: 100}}\nothers: {tokens_per_minute: 1000}");
    await q.enter(ticket("a", 320)); // 80 tokens at 4 chars a token
    expect(q.tokens("a").cur).toBe(80);
    const refused = await q.enter(ticket("a", 100)).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RouterError);
    expect(refused).toMatchObject({ code: "tenant_quota_exceeded", status: 429 });
    // 80 of 100 used, 25 more: once 5 of the 80 have faded, 3.75 s into the next minute.
    expect((refused as RouterError).retryAfterSecs).toBe(64);
    expect(q.refusals).toEqual([["a", "quota_tokens"]]);
    // Another tenant has its own counters (the `others` row).
    await q.enter(ticket("b", 320));
    expect(q.tokens("b").cur).toBe(80);
  });

  it("replaces the estimate with what the engine reported when the request ends", async () => {
    const q = setup("others: {tokens_per_minute: 10000}");
    const release = await q.enter(ticket("a", 400, 50)); // estimate 100
    release({ status: 200, usage: { promptTokens: 90, completionTokens: 30 } });
    expect(q.tokens("a").cur).toBe(120);
    // Not reported: the estimate and the output asked for.
    (await q.enter(ticket("a", 400, 50)))({ status: 200 });
    expect(q.tokens("a").cur).toBe(120 + 150);
    // Not served (a worker error; refused by a later step): refunded.
    (await q.enter(ticket("a", 400)))({ status: 502 });
    (await q.enter(ticket("a", 400)))();
    expect(q.tokens("a").cur).toBe(270);
    // A client gone mid-answer was served: charged.
    (await q.enter(ticket("a", 400)))({
      status: 499,
      upstreamStatus: 200,
      usage: { promptTokens: 100, completionTokens: 7 },
    });
    expect(q.tokens("a").cur).toBe(377);
  });

  it("refunds into the minute it charged, and charges what was more than estimated to the current one", async () => {
    const q = setup("others: {tokens_per_minute: 10000}");
    const release = await q.enter(ticket("a", 4000)); // 1000 charged this minute
    q.advance(WINDOW_MS);
    release({ status: 200, usage: { promptTokens: 400, completionTokens: 0 } });
    expect(q.tokens("a")).toMatchObject({ prev: 400, cur: 0 });
    const second = await q.enter(ticket("a", 40)); // 10
    second({ status: 200, usage: { promptTokens: 10, completionTokens: 500 } });
    expect(q.tokens("a")).toMatchObject({ prev: 400, cur: 510 });
  });

  it("lets requests without a body, and tenants without limits, through without counting", async () => {
    const q = setup("tenants: {free: {}}\nothers: {concurrent_requests: 1}");
    expect(q.step.enter(ticket("x", undefined))).toBeTypeOf("function");
    expect(q.step.enter(ticket("free", 100))).toBeTypeOf("function");
    expect([...q.store.usage()]).toEqual([]);
  });
});

describe("QuotaStep: concurrent requests", () => {
  it("refuses beyond the limit until one ends", async () => {
    const q = setup("tenants: {a: {concurrent_requests: 2}}");
    const first = await q.enter(ticket("a", 10));
    const second: AdmissionRelease = await q.enter(ticket("a", 10));
    await expect(q.enter(ticket("a", 10))).rejects.toMatchObject({
      code: "tenant_concurrency_exceeded",
      retryAfterSecs: 1,
    });
    expect(q.refusals).toEqual([["a", "quota_concurrency"]]);
    first({ status: 200 });
    first({ status: 200 }); // a release counts once
    await q.enter(ticket("a", 10));
    second();
    expect(q.tokens("a").running).toBe(1);
  });

  it("forgets an idle tenant's counters when the tenant table does, not while it has requests under way", async () => {
    const q = setup("others: {concurrent_requests: 5}");
    const release = await q.enter(ticket("a", 10));
    q.store.forget("a");
    expect(q.tokens("a").running).toBe(1);
    release({ status: 200 });
    expect([...q.store.usage()]).toEqual([]);
  });
});

describe("tokensToCharge", () => {
  it("is the reported prompt and completion, else the estimate and the output asked for", () => {
    expect(
      tokensToCharge(100, 20, { status: 200, usage: { promptTokens: 80, completionTokens: 5 } }),
    ).toBe(85);
    expect(tokensToCharge(100, 20, { status: 200, usage: { promptTokens: 80 } })).toBe(100);
    expect(tokensToCharge(100, undefined, { status: 200 })).toBe(356);
    expect(tokensToCharge(100, 20, { status: 429 })).toBe(0);
    expect(tokensToCharge(100, 20, undefined)).toBe(0);
  });
});
