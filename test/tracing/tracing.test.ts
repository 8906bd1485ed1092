import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { startPdFleet } from "../disaggregation/pd-fleet.js";
import { postJson, startTestRouter } from "../helpers/router.js";
import { attribute, OtlpReceiver, type OtlpSpan } from "./otlp-receiver.js";

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN = "00f067aa0ba902b7";
const TRACEPARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;

const ENV_KEYS = ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME"] as const;

function chat(router: RunningRouter, headers: Record<string, string>): Promise<Response> {
  return postJson(
    `${router.url}/v1/chat/completions`,
    {
      model: "m",
      messages: [{ role: "user", content: "a prompt long enough to be worth routing on" }],
      max_tokens: 2,
    },
    headers,
  );
}

function byName(spans: OtlpSpan[], name: string): OtlpSpan[] {
  return spans.filter((s) => s.name === name);
}

describe("OpenTelemetry tracing over OTLP/HTTP (--otlp-endpoint)", () => {
  const receiver = new OtlpReceiver();
  const sims: SimWorker[] = [];
  let router: RunningRouter | undefined;
  const saved: Record<string, string | undefined> = {};

  beforeEach(() => {
    for (const key of ENV_KEYS) saved[key] = process.env[key];
    // JSON, so the test reads the spans without a protobuf decoder.
    process.env.OTEL_EXPORTER_OTLP_PROTOCOL = "http/json";
    process.env.OTEL_SERVICE_NAME = "router-under-test";
  });

  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
    for (const sim of sims.splice(0)) await sim.close();
    await receiver.close();
    receiver.posts.length = 0;
    for (const key of ENV_KEYS) {
      if (saved[key] === undefined) delete process.env[key];
      else process.env[key] = saved[key];
    }
  });

  it("exports a request span under the client's traceparent, with body read, decision, attempt and first byte under it, and passes the attempt's traceparent and the client's tracestate to the worker", async () => {
    const endpoint = await receiver.start();
    const sim = await startSimWorker({ id: "w", timeScale: 0 });
    sims.push(sim);
    router = await startTestRouter({ workerUrls: [sim.url], otlpEndpoint: endpoint });

    const res = await chat(router, { traceparent: TRACEPARENT, tracestate: "vendor=abc" });
    expect(res.status).toBe(200);
    await res.text();
    // The stop flushes the batch processor: every span is at the receiver after it.
    await router.stop(100);
    router = undefined;

    expect(receiver.posts.every((p) => p.path === "/v1/traces")).toBe(true);
    expect(receiver.serviceNames()).toContain("router-under-test");
    const spans = receiver.spans().filter((s) => s.traceId === TRACE_ID);
    const [request] = byName(spans, "POST /v1/chat/completions");
    expect(request).toBeDefined();
    if (request === undefined) return;
    // The client's span is the request span's parent: one trace from the client on.
    expect(request.parentSpanId).toBe(CLIENT_SPAN);
    expect(attribute(request, "http.response.status_code")).toBe(200);
    expect(attribute(request, "radixgate.attempts")).toBe(1);
    expect(request.events?.map((e) => e.name)).toContain("first_byte");
    // The cache account (cache-account/) on the request span.
    expect(attribute(request, "radixgate.cache.prompt_tokens")).toBeGreaterThan(0);
    expect(attribute(request, "radixgate.cache.available_tokens")).toBe(0);
    expect(attribute(request, "radixgate.cache.reported_tokens")).toBeTypeOf("number");

    for (const name of ["body_read", "decision", "upstream_attempt"]) {
      const children = byName(spans, name);
      expect(children, name).toHaveLength(1);
      expect(children[0]?.parentSpanId, name).toBe(request.spanId);
    }
    const [decision] = byName(spans, "decision");
    expect(attribute(decision!, "radixgate.policy")).toBeTypeOf("string");
    const workerId = attribute(request, "radixgate.worker");
    expect(workerId).toBeTypeOf("string");
    expect(attribute(decision!, "radixgate.worker")).toBe(workerId);
    expect(attribute(decision!, "radixgate.held_chars")).toBe(0);
    const [attempt] = byName(spans, "upstream_attempt");
    expect(attribute(attempt!, "radixgate.worker")).toBe(workerId);
    expect(attribute(attempt!, "url.full")).toBe(sim.url);
    expect(attribute(attempt!, "http.response.status_code")).toBe(200);
    expect(attempt!.events?.map((e) => e.name)).toContain("first_byte");

    // The worker got the attempt span as its parent, in the client's trace, with its tracestate:
    // an engine with tracing on (vLLM --otlp-traces-endpoint, SGLang --enable-trace) joins here.
    const stats = sim.stats();
    expect(stats.lastTraceparent).toBe(`00-${TRACE_ID}-${attempt!.spanId}-01`);
    expect(stats.lastTracestate).toBe("vendor=abc");
  });

  it("gives each upstream attempt its own span and traceparent: a retry after a 503 is a second child of the request span", async () => {
    const endpoint = await receiver.start();
    const failing = await startSimWorker({ id: "bad", timeScale: 0 });
    const good = await startSimWorker({ id: "good", timeScale: 0 });
    sims.push(failing, good);
    failing.setFaults({ status: 503 });
    router = await startTestRouter({
      workerUrls: [failing.url, good.url],
      policy: "round_robin",
      otlpEndpoint: endpoint,
      // The breaker must not take "bad" out before a request has tried it first.
      cbFailureThreshold: 100,
    });
    // Round robin: one of the first two requests starts at the failing worker.
    for (let i = 0; i < 2; i += 1) {
      const res = await chat(router, {
        traceparent: `00-${TRACE_ID.slice(0, 31)}${i}-${CLIENT_SPAN}-01`,
      });
      expect(res.status).toBe(200);
      await res.text();
    }
    await router.stop(100);
    router = undefined;

    const spans = receiver.spans();
    const requests = byName(spans, "POST /v1/chat/completions");
    const retried = requests.find((r) => attribute(r, "radixgate.attempts") === 2);
    expect(retried).toBeDefined();
    const attempts = byName(spans, "upstream_attempt").filter(
      (s) => s.parentSpanId === retried!.spanId,
    );
    expect(attempts.map((a) => attribute(a, "url.full"))).toEqual([failing.url, good.url]);
    expect(attempts.map((a) => attribute(a, "http.response.status_code"))).toEqual([503, 200]);
    expect(attempts[0]?.status?.code).toBe(2);
    // The failing worker saw only the retried request: its first attempt's span as parent.
    expect(failing.stats().lastTraceparent).toBe(
      `00-${retried!.traceId}-${attempts[0]!.spanId}-01`,
    );
  });

  it("starts a new trace when the client sends no traceparent, and still gives the worker one", async () => {
    const endpoint = await receiver.start();
    const sim = await startSimWorker({ id: "w", timeScale: 0 });
    sims.push(sim);
    router = await startTestRouter({ workerUrls: [sim.url], otlpEndpoint: endpoint });
    const res = await chat(router, {});
    await res.text();
    await router.stop(100);
    router = undefined;
    const [request] = byName(receiver.spans(), "POST /v1/chat/completions");
    // Both must exist: with no span and no traceparent the two checks below would compare
    // undefined with undefined.
    expect(request).toBeDefined();
    expect(sim.stats().lastTraceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    expect(request?.parentSpanId ?? "").toBe("");
    expect(sim.stats().lastTraceparent?.split("-")[1]).toBe(request?.traceId);
  });

  // Regression: the client's tracestate went on beside a traceparent the router had replaced,
  // so the worker saw one trace's vendor state under another trace.
  it.each([
    ["no traceparent", {}],
    ["a malformed traceparent", { traceparent: "00-not-a-trace-01" }],
  ])("with %s the client's tracestate is dropped with it", async (_, headers) => {
    const endpoint = await receiver.start();
    const sim = await startSimWorker({ id: "w", timeScale: 0 });
    sims.push(sim);
    router = await startTestRouter({ workerUrls: [sim.url], otlpEndpoint: endpoint });
    const res = await chat(router, { ...headers, tracestate: "vendor=abc" });
    await res.text();
    expect(sim.stats().lastTraceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
    expect(sim.stats().lastTracestate).toBeUndefined();
  });

  it("gives each side of a prefill/decode pair its own attempt span and traceparent (SGLang PD)", async () => {
    const endpoint = await receiver.start();
    const fleet = await startPdFleet(
      "sglang",
      { prefill: 1, decode: 1 },
      { otlpEndpoint: endpoint },
    );
    try {
      // Streamed: the prefill side's answer is drained chunk by chunk too.
      const res = await postJson(
        `${fleet.router.url}/v1/chat/completions`,
        {
          model: "m",
          messages: [{ role: "user", content: "a prompt long enough to be worth routing on" }],
          max_tokens: 8,
          stream: true,
        },
        { traceparent: TRACEPARENT },
      );
      expect(res.status).toBe(200);
      await res.text();
    } finally {
      await fleet.close();
    }
    const spans = receiver.spans().filter((s) => s.traceId === TRACE_ID);
    const [request] = byName(spans, "POST /v1/chat/completions");
    const attempts = byName(spans, "upstream_attempt");
    expect(attempts.map((a) => attribute(a, "radixgate.side")).sort()).toEqual([
      "decode",
      "prefill",
    ]);
    for (const a of attempts) expect(a.parentSpanId).toBe(request?.spanId);
    const bySide = (side: string) => attempts.find((a) => attribute(a, "radixgate.side") === side);
    expect(fleet.prefill[0]?.stats().lastTraceparent).toBe(
      `00-${TRACE_ID}-${bySide("prefill")?.spanId}-01`,
    );
    expect(fleet.decode[0]?.stats().lastTraceparent).toBe(
      `00-${TRACE_ID}-${bySide("decode")?.spanId}-01`,
    );
    expect(byName(spans, "decision")[0]?.parentSpanId).toBe(request?.spanId);
    // One first_byte per side, however many chunks its answer came in.
    for (const a of attempts)
      expect(a.events?.filter((e) => e.name === "first_byte").length ?? 0).toBe(1);
    expect(request?.events?.filter((e) => e.name === "first_byte").length).toBeGreaterThanOrEqual(
      1,
    );
    expect(request?.events?.filter((e) => e.name === "first_byte").length).toBeLessThanOrEqual(2);
  });
});
