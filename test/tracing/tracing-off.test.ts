import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

// Every module that would load the OpenTelemetry SDK records itself when a module imports it.
const loaded = vi.hoisted(() => [] as string[]);
vi.mock("../../src/tracing/otel-tracing.js", async (original) => {
  loaded.push("src/tracing/otel-tracing.ts");
  return original();
});
vi.mock("@opentelemetry/sdk-trace", async (original) => {
  loaded.push("@opentelemetry/sdk-trace");
  return original();
});
vi.mock("@opentelemetry/api", async (original) => {
  loaded.push("@opentelemetry/api");
  return original();
});

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

describe("tracing off (the default)", () => {
  let sim: SimWorker;
  let router: RunningRouter;
  const saved = {
    base: process.env.OTEL_EXPORTER_OTLP_ENDPOINT,
    traces: process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
  };

  beforeAll(async () => {
    delete process.env.OTEL_EXPORTER_OTLP_ENDPOINT;
    delete process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT;
    sim = await startSimWorker({ id: "w", timeScale: 0 });
    router = await startTestRouter({ workerUrls: [sim.url] });
  });

  afterAll(async () => {
    await router.stop(100);
    await sim.close();
    if (saved.base !== undefined) process.env.OTEL_EXPORTER_OTLP_ENDPOINT = saved.base;
    if (saved.traces !== undefined) process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = saved.traces;
  });

  it("loads no OpenTelemetry module and forwards the client's traceparent and tracestate unchanged, as a transparent proxy does", async () => {
    const res = await postJson(
      `${router.url}/v1/chat/completions`,
      { model: "m", messages: [{ role: "user", content: "hello there" }], max_tokens: 2 },
      { traceparent: TRACEPARENT, tracestate: "vendor=abc" },
    );
    expect(res.status).toBe(200);
    await res.text();
    expect(router.context.tracing).toBeUndefined();
    expect(loaded).toEqual([]);
    expect(sim.stats().lastTraceparent).toBe(TRACEPARENT);
    expect(sim.stats().lastTracestate).toBe("vendor=abc");
  });

  it("the check above would see the SDK: starting tracing loads it", async () => {
    const { startTracing } = await import("../../src/tracing/start-tracing.js");
    const { createLogger } = await import("../../src/logger.js");
    const tracing = await startTracing(
      {
        url: "http://127.0.0.1:9/v1/traces",
        protocol: "http/json",
        serviceName: "t",
        sampler: "always_off",
        ratio: 1,
      },
      createLogger({ level: "silent" }),
    );
    expect(loaded).toContain("src/tracing/otel-tracing.ts");
    expect(loaded).toContain("@opentelemetry/sdk-trace");
    await tracing?.shutdown(1000);
  });
});
