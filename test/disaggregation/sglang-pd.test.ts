import { beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { postJson } from "../helpers/router.js";
import { events, type PdFleet, pdChat, totalRequests, usePdFleet } from "./pd-fleet.js";

const SYSTEM = "You are a careful assistant for the shipping company. ".repeat(20);

function chat(fleet: PdFleet, question: string, extra: Record<string, unknown> = {}) {
  return pdChat(fleet, { model: "m", system: SYSTEM, maxTokens: 4 }, question, extra);
}

describe("SGLang PD mode (issue 25): a prefill and a decode worker per request, over real sockets", () => {
  const fleetOf = usePdFleet("sglang", { prefill: 2, decode: 2 });
  let fleet: PdFleet;
  beforeAll(() => {
    fleet = fleetOf();
  });

  it("sends the request to both sides with the bootstrap fields; the decode side answers", async () => {
    const before = totalRequests(fleet.prefill);
    const res = await chat(fleet, "Where is parcel 1?");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { choices: unknown[]; usage: { completion_tokens: number } };
    expect(body.choices).toHaveLength(1);
    // The decode worker generated the whole answer; its prompt's KV came from the prefill side.
    expect(body.usage.completion_tokens).toBe(4);
    const decodeId = res.headers.get("x-sim-worker-id");
    expect(["d1", "d2"]).toContain(decodeId);
    expect(res.headers.get("x-radixgate-route")).toMatch(/;prefill=/);
    expect(totalRequests(fleet.prefill)).toBe(before + 1);
    const decode = fleet.decode.find((d) => d.id === decodeId)!;
    expect(decode.stats().cachedTokens).toBeGreaterThan(0);
  });

  it("keeps one prompt prefix on one prefill worker (prefix-aware prefill choice)", async () => {
    const before = fleet.prefill.map((p) => p.stats().requests);
    for (let i = 0; i < 4; i++)
      expect((await chat(fleet, `Status of order ${i}?`)).status).toBe(200);
    const added = fleet.prefill.map((p, i) => p.stats().requests - before[i]!);
    expect(added.sort()).toEqual([0, 4]);
  });

  it("streams the decode side's answer", async () => {
    const res = await chat(fleet, "Stream it", { stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
    const data = events(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    expect(data.length).toBeGreaterThan(2);
  });

  it("a batch gets one room per item (arrays), and each item its answer", async () => {
    const res = await postJson(`${fleet.router.url}/v1/completions`, {
      model: "m",
      prompt: ["first prompt of the batch", "second prompt of the batch"],
      max_tokens: 2,
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(2);
  });

  it("the decode simulator refuses a request without the bootstrap fields, saying why", async () => {
    const res = await postJson(`${fleet.decode[0]!.url}/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "hi" }],
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(await res.json())).toMatch(
      /bootstrap_host, bootstrap_room, bootstrap_port/,
    );
  });

  it("a prefill failure before the first byte retries the pair on another prefill worker", async () => {
    // Learn which prefill worker this prefix goes to, then make it fail once.
    const counts = fleet.prefill.map((p) => p.stats().requests);
    expect((await chat(fleet, "retry probe")).status).toBe(200);
    const chosen = fleet.prefill.findIndex((p, i) => p.stats().requests > counts[i]!);
    fleet.prefill[chosen]!.setFaults({ failFirst: 1, failStatus: 503 });
    const before = fleet.prefill.map((p) => p.stats().requests);
    const res = await chat(fleet, "retry probe, again");
    expect(res.status).toBe(200);
    // Both prefill workers were asked once: the first failed, the pair went to the other.
    expect(fleet.prefill.map((p, i) => p.stats().requests - before[i]!)).toEqual([1, 1]);
    expect(fleet.prefill[chosen]!.stats().failed).toBe(1);
  });

  it("a decode failure before the first byte retries the pair on another decode worker", async () => {
    const [d1, d2] = fleet.decode as [SimWorker, SimWorker];
    d1.setFaults({ failFirst: 1, failStatus: 503 });
    // Whichever decode worker the load policy picks first, every answer is whole, and d1's one
    // failure was retried on d2.
    for (let i = 0; d1.stats().failed === 0 && i < 6; i++) {
      const res = await chat(fleet, `decode retry ${i}`, { stream: true });
      expect(res.status).toBe(200);
      expect(events(await res.text()).at(-1)).toBe("[DONE]");
    }
    expect(d1.stats().failed).toBe(1);
    expect(d2.stats().failed).toBe(0);
  });

  it("a decode failure after the first byte is never retried: the stream ends cut", async () => {
    const prefillBefore = totalRequests(fleet.prefill);
    const decodeBefore = totalRequests(fleet.decode);
    for (const d of fleet.decode) d.setFaults({ crashMidStream: 2 });
    const res = await chat(fleet, "cut me", { stream: true, max_tokens: 8 });
    expect(res.status).toBe(200);
    const text = await res.text().catch(() => "");
    expect(text).not.toMatch(/\[DONE\]/);
    expect(totalRequests(fleet.prefill)).toBe(prefillBefore + 1);
    expect(totalRequests(fleet.decode)).toBe(decodeBefore + 1);
  });

  it("a prefill side that fails on every worker ends in the last prefill worker's answer, not a hang", async () => {
    for (const p of fleet.prefill) p.setFaults({ status: 503 });
    const res = await chat(fleet, "no prefill");
    expect(res.status).toBe(503);
    expect(fleet.prefill.map((p) => p.stats().failed >= 1)).toEqual([true, true]);
    for (const p of fleet.prefill) p.setFaults({ status: null });
  });
});

describe("SGLang PD mode: the prefill side after the first byte", () => {
  it("a prefill worker gone after the decode stream began does not stop or repeat the stream", async () => {
    const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
    const decode = await startSimWorker({ id: "d", role: "decode", timeScale: 0.2 });
    const { startTestRouter } = await import("../helpers/router.js");
    const router = await startTestRouter({
      pdDisaggregation: true,
      prefill: [{ url: prefill.url, bootstrapPort: prefill.bootstrapPort ?? null }],
      decode: [decode.url],
    });
    try {
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "m",
        prompt: "a prompt for a long stream",
        max_tokens: 40,
        stream: true,
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const first = await reader.read(); // the first byte reached the client
      await prefill.close();
      let text = Buffer.from(first.value ?? new Uint8Array()).toString();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString();
      }
      expect(text).toMatch(/\[DONE\]/);
      expect(decode.stats().requests).toBe(1);
    } finally {
      await router.stop(100);
      await decode.close();
      await prefill.close();
    }
  });
});

describe("SGLang PD mode: the prefill worker's load", () => {
  it("regression: its pending prefill ends when its own answer comes, not when the decode side answers", async () => {
    const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
    // A decode worker that never answers: the pair's decode head does not come.
    const decode = await startSimWorker({
      id: "d",
      role: "decode",
      timeScale: 0,
      faults: { hang: true },
    });
    const { startTestRouter, waitFor } = await import("../helpers/router.js");
    const router = await startTestRouter({
      pdDisaggregation: true,
      prefill: [{ url: prefill.url, bootstrapPort: prefill.bootstrapPort ?? null }],
      decode: [decode.url],
    });
    const client = new AbortController();
    try {
      const pending = fetch(`${router.url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", prompt: "x".repeat(4000), max_tokens: 4 }),
        signal: client.signal,
      }).catch(() => undefined);
      const worker = router.context.registry.list().find((w) => w.role.type === "prefill")!;
      await waitFor(() => prefill.stats().completed === 1, 5000, "the prefill answer");
      // The prefill worker computed the prompt: the policies must not see it as still queued there.
      await waitFor(() => worker.pendingPrefillChars === 0, 5000, "pending prefill to clear");
      expect(decode.stats().hanging).toBe(1);
      client.abort();
      await pending;
    } finally {
      client.abort();
      await router.stop(100);
      await Promise.all([prefill.close(), decode.close()]);
    }
  });
});

describe("SGLang PD mode: workers added through the admin API (issue 25)", () => {
  it("takes worker_type prefill with its bootstrap_port and decode, as SGLang's gateway does; refuses a regular worker", async () => {
    const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
    const decode = await startSimWorker({ id: "d", role: "decode", timeScale: 0 });
    const regular = await startSimWorker({ id: "r", timeScale: 0 });
    const { startTestRouter } = await import("../helpers/router.js");
    const router = await startTestRouter({ pdDisaggregation: true });
    try {
      const added = await postJson(`${router.url}/workers`, {
        url: prefill.url,
        worker_type: "prefill",
        bootstrap_port: prefill.bootstrapPort,
      });
      expect(added.status).toBe(202);
      expect(await added.json()).toMatchObject({
        worker_type: "prefill",
        bootstrap_port: prefill.bootstrapPort,
        healthy: true,
      });
      const legacy = await fetch(
        `${router.url}/add_worker?url=${encodeURIComponent(decode.url)}&worker_type=decode`,
        { method: "POST" },
      );
      expect(legacy.status).toBe(200);
      const refused = await postJson(`${router.url}/workers`, { url: regular.url });
      expect(refused.status).toBe(400);
      expect(JSON.stringify(await refused.json())).toMatch(/worker_type of prefill or decode/);
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "m",
        prompt: "served by workers the admin API added",
        max_tokens: 2,
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-sim-worker-id")).toBe("d");
      expect(prefill.stats().requests).toBe(1);
    } finally {
      await router.stop(100);
      await Promise.all([prefill.close(), decode.close(), regular.close()]);
    }
  });
});

describe("SGLang PD mode: readiness", () => {
  it("regression: not ready while one side has no available worker (a request needs a pair)", async () => {
    const decode = await startSimWorker({ id: "d", role: "decode", timeScale: 0 });
    const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
    const { startTestRouter } = await import("../helpers/router.js");
    const router = await startTestRouter({ pdDisaggregation: true, decode: [decode.url] });
    try {
      const alone = await fetch(`${router.url}/readiness`);
      expect(alone.status).toBe(503);
      expect(await alone.json()).toMatchObject({ prefill: 0, decode: 1 });
      await postJson(`${router.url}/workers`, { url: prefill.url, worker_type: "prefill" });
      const pair = await fetch(`${router.url}/readiness`);
      expect(pair.status).toBe(200);
      expect(await pair.json()).toMatchObject({ status: "ready", prefill: 1, decode: 1 });
    } finally {
      await router.stop(100);
      await Promise.all([prefill.close(), decode.close()]);
    }
  });
});

describe("SGLang PD mode: each side's breaker on its own", () => {
  it("a decode failure opens the decode worker's breaker, not its prefill partner's", async () => {
    const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
    const d1 = await startSimWorker({ id: "d1", role: "decode", timeScale: 0 });
    const d2 = await startSimWorker({ id: "d2", role: "decode", timeScale: 0 });
    const { startTestRouter } = await import("../helpers/router.js");
    const router = await startTestRouter({
      pdDisaggregation: true,
      prefill: [{ url: prefill.url, bootstrapPort: prefill.bootstrapPort ?? null }],
      decode: [d1.url, d2.url],
      cbFailureThreshold: 1,
      cbTimeoutSecs: 600,
    });
    try {
      d1.setFaults({ status: 503 });
      d2.setFaults({ status: 503 });
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "m",
        prompt: "both decode workers are down",
        max_tokens: 2,
      });
      expect(res.status).toBe(503);
      const state = (url: string) =>
        router.context.registry.list().find((w) => w.url === url)!.breaker.state;
      expect(state(d1.url)).toBe("open");
      expect(state(d2.url)).toBe("open");
      // The prefill worker was stopped because its partner failed: nothing against it.
      expect(state(prefill.url)).toBe("closed");
    } finally {
      await router.stop(100);
      await Promise.all([prefill.close(), d1.close(), d2.close()]);
    }
  });
});
