/**
 * POST /debug/route reports the request's tenant quota (issue 24 follow-up): whether it would be
 * refused now, the tokens left in the window, the concurrency in use and the Retry-After it
 * would get, without charging anything.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { metric, startedPerTest } from "../faults/support.js";
import { postJson, startTestRouter } from "../helpers/router.js";

interface QuotaView {
  tokens_per_minute: number | null;
  tokens_used: number;
  tokens_left: number | null;
  estimate: number;
  concurrent_requests: number | null;
  running: number;
  would_refuse: boolean;
  reason: string | null;
  retry_after_secs: number | null;
}

const body = (tenant: string, stream = false) => ({
  model: "m",
  prompt: `${tenant} `.padEnd(400, "x"),
  max_tokens: stream ? 2000 : 10,
  stream,
});

async function explained(url: string, tenant: string): Promise<QuotaView | undefined> {
  const res = await postJson(`${url}/debug/route/v1/completions`, body(tenant), {
    "x-tenant-id": tenant,
  });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { admission: { steps?: { quota?: QuotaView } } };
  return json.admission.steps?.quota;
}

describe("/debug/route and --tenant-quota", () => {
  const started = startedPerTest();

  it("says whether the tenant's quota would refuse the request now, and charges nothing", async () => {
    const sim = await startSimWorker({ id: "w" });
    started.sims = [sim];
    const file = join(mkdtempSync(join(tmpdir(), "radixgate-quota-")), "quota.yaml");
    writeFileSync(
      file,
      "tenants:\n  t:\n    tokens_per_minute: 400\n  c:\n    concurrent_requests: 1\n  free: {}\n",
    );
    const router = await startTestRouter({ workerUrls: [sim.url], tenantQuota: file });
    started.router = router;

    const fresh = await explained(router.url, "t");
    expect(fresh).toMatchObject({
      tokens_per_minute: 400,
      tokens_used: 0,
      tokens_left: 400,
      running: 0,
      would_refuse: false,
      reason: null,
      retry_after_secs: null,
    });
    expect(fresh?.estimate).toBeGreaterThan(50);
    // Explaining charged nothing: the quota is still whole.
    expect(await explained(router.url, "t")).toMatchObject({ tokens_used: 0, tokens_left: 400 });

    // ~110 tokens each: three fit in 400, a fourth would not.
    for (let i = 0; i < 3; i++) {
      const res = await postJson(`${router.url}/v1/completions`, body("t"), { "x-tenant-id": "t" });
      await res.text();
      expect(res.status).toBe(200);
    }
    const used = await metric(router.url, "radixgate_tenant_quota_usage", {
      tenant: "t",
      limit: "tokens_per_minute",
    });
    const spent = await explained(router.url, "t");
    // The same counters as the gauge (within rounding, should a minute end in between).
    expect(Math.abs((spent?.tokens_used ?? 0) - used)).toBeLessThanOrEqual(1);
    expect(Math.abs((spent?.tokens_left ?? 0) - (400 - used))).toBeLessThanOrEqual(2);
    expect(spent).toMatchObject({ would_refuse: true, reason: "quota_tokens" });
    expect(spent?.retry_after_secs).toBeGreaterThanOrEqual(1);
    expect(spent?.retry_after_secs).toBeLessThanOrEqual(120);
    // The real request gets what /debug/route said, and the explanation charged nothing.
    const refused = await postJson(`${router.url}/v1/completions`, body("t"), {
      "x-tenant-id": "t",
    });
    await refused.text();
    expect(refused.status).toBe(429);
    const after = await metric(router.url, "radixgate_tenant_quota_usage", {
      tenant: "t",
      limit: "tokens_per_minute",
    });
    expect(after).toBeLessThanOrEqual(used);

    // Concurrency: one stream under way fills tenant c's only place.
    const stream = await postJson(`${router.url}/v1/completions`, body("c", true), {
      "x-tenant-id": "c",
    });
    const reader = stream.body?.getReader();
    await reader?.read();
    expect(await explained(router.url, "c")).toMatchObject({
      concurrent_requests: 1,
      running: 1,
      tokens_per_minute: null,
      tokens_left: null,
      would_refuse: true,
      reason: "quota_concurrency",
      retry_after_secs: 1,
    });
    await reader?.cancel();
    // A tenant without limits: no quota to report.
    expect(await explained(router.url, "free")).toBeUndefined();
  });
});
