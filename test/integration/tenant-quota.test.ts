/**
 * Per-tenant quotas end to end (issue 24 item 4), per process (no --state-url): real sockets, a
 * simulated engine whose answers report usage, a --tenant-quota file on disk.
 */
import { renameSync, writeFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { ConfigError } from "../../src/errors.js";
import { metric, startedPerTest } from "../faults/support.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { askAsTenant as ask, quotaFile } from "../helpers/tenant-request.js";

/** Replaces the file as tools do (a new file renamed over it). */
function rewrite(path: string, text: string): void {
  writeFileSync(`${path}.new`, text);
  renameSync(`${path}.new`, path);
}

describe("--tenant-quota (per process)", () => {
  const started = startedPerTest();

  it("a tenant over its tokens per minute gets 429 with Retry-After while another tenant is served", async () => {
    const sim = await startSimWorker({ id: "w" });
    started.sims = [sim];
    const file = quotaFile("tenants:\n  flood:\n    tokens_per_minute: 400\n  chat: {}\n");
    const router = await startTestRouter({ workerUrls: [sim.url], tenantQuota: file });
    started.router = router;
    // ~100 prompt tokens and 10 generated each: three fit in 400, the fourth does not.
    const statuses: number[] = [];
    let refused: Response | undefined;
    for (let i = 0; i < 6 && refused === undefined; i++) {
      const res = await ask(router.url, "flood");
      statuses.push(res.status);
      if (res.status === 429) refused = res;
      else await res.text();
    }
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
    expect(refused).toBeDefined();
    const body = (await refused?.json()) as {
      error: { code: string; type: string; message: string };
    };
    expect(body.error).toMatchObject({ code: "tenant_quota_exceeded", type: "rate_limit_error" });
    const retryAfter = Number(refused?.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(120);
    // Another tenant is served meanwhile (listed with no limits).
    for (let i = 0; i < 5; i++) expect((await ask(router.url, "chat")).status).toBe(200);
    expect(
      await metric(router.url, "radixgate_queue_rejections_total", { reason: "quota_tokens" }),
    ).toBe(1);
    expect(
      await metric(router.url, "radixgate_tenant_admission_refusals_total", {
        tenant: "flood",
        reason: "quota_tokens",
      }),
    ).toBe(1);
    // What the engine reported was charged: prompt (~100) and 10 generated, three times.
    const used = await metric(router.url, "radixgate_tenant_quota_usage", {
      tenant: "flood",
      limit: "tokens_per_minute",
    });
    expect(used).toBeGreaterThan(300);
    expect(used).toBeLessThanOrEqual(400);
    expect(
      await metric(router.url, "radixgate_tenant_quota_limit", {
        tenant: "flood",
        limit: "tokens_per_minute",
      }),
    ).toBe(400);
  });

  it("refuses a tenant's request beyond its concurrent requests until one ends", async () => {
    const sim = await startSimWorker({ id: "w" });
    started.sims = [sim];
    const file = quotaFile("others:\n  concurrent_requests: 2\n");
    const router = await startTestRouter({ workerUrls: [sim.url], tenantQuota: file });
    started.router = router;
    // Two long streams under way (their first chunk arrived).
    const streams = await Promise.all([
      ask(router.url, "agent", { maxTokens: 2000, stream: true }),
      ask(router.url, "agent", { maxTokens: 2000, stream: true }),
    ]);
    const readers = streams.map((s) => s.body?.getReader());
    for (const reader of readers) await reader?.read();
    const third = await ask(router.url, "agent");
    expect(third.status).toBe(429);
    expect(third.headers.get("retry-after")).toBe("1");
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe(
      "tenant_concurrency_exceeded",
    );
    // Another tenant has its own two places.
    expect((await ask(router.url, "other")).status).toBe(200);
    expect(
      await metric(router.url, "radixgate_tenant_quota_usage", {
        tenant: "agent",
        limit: "concurrent_requests",
      }),
    ).toBe(2);
    await readers[0]?.cancel();
    await waitFor(
      async () => (await ask(router.url, "agent")).status === 200,
      5000,
      "a place freed",
    );
    await readers[1]?.cancel();
  });

  it("applies a changed file, and keeps the last good one when the next is bad", async () => {
    const sim = await startSimWorker({ id: "w" });
    started.sims = [sim];
    const file = quotaFile(
      "tenants:\n  t:\n    concurrent_requests: 1\n    tokens_per_minute: 50\n",
    );
    const router = await startTestRouter({ workerUrls: [sim.url], tenantQuota: file });
    started.router = router;
    // Larger than the whole limit: passes while the window is empty, then not.
    expect((await ask(router.url, "t", { chars: 400 })).status).toBe(200);
    expect((await ask(router.url, "t", { chars: 400 })).status).toBe(429);
    rewrite(file, "tenants:\n  t:\n    tokens_per_minute: 100000\n");
    await waitFor(
      async () => {
        const res = await ask(router.url, "t", { chars: 400 });
        await res.text();
        return res.status === 200;
      },
      10_000,
      "the new limit applied",
    );
    rewrite(file, "tenants:\n  t:\n    tokens_per_minute: lots\n");
    await waitFor(
      async () =>
        (await metric(router.url, "radixgate_quota_file_reloads_total", {
          outcome: "rejected",
        })) === 1,
      10_000,
      "the bad version read",
    );
    expect((await ask(router.url, "t", { chars: 400 })).status).toBe(200);
  });

  it("refuses to start with a bad file, naming the file, the line and the key", async () => {
    const file = quotaFile("tenants:\n  batch:\n    tokens_per_minute: 0\n");
    const starting = startTestRouter({ tenantQuota: file });
    await expect(starting).rejects.toBeInstanceOf(ConfigError);
    await expect(starting).rejects.toThrow(
      `--tenant-quota ${file}: line 3 (tenants.batch.tokens_per_minute): must be a whole number`,
    );
  });
});
