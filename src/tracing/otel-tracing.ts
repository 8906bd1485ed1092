/**
 * The OpenTelemetry side of tracing: the SDK's tracer provider, the OTLP/HTTP exporter and the
 * W3C trace-context propagator. Loaded only when tracing is on (start-tracing.ts); the rest of
 * the router sees the interfaces of request-trace.ts.
 *
 * Parents are passed explicitly (no context manager): the router's request path is a chain of
 * awaits it owns, so each span names its parent and no AsyncLocalStorage is needed.
 */
import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { setGlobalErrorHandler, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter as JsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import type { Logger } from "../logger.js";
import { OtelRequestTrace } from "./otel-request-trace.js";
import type { RequestTrace, Tracing } from "./request-trace.js";
import type { SamplerName, TracingOptions } from "./settings.js";

/** At most one export-failure line a minute: a collector that is down must not flood the log. */
const ERROR_LOG_INTERVAL_MS = 60_000;

export class OtelTracing implements Tracing {
  private readonly provider: TracerProvider;
  private readonly tracer: Tracer;
  private readonly propagator = new W3CTraceContextPropagator();

  constructor(options: TracingOptions, logger: Logger) {
    let lastErrorAt = 0;
    setGlobalErrorHandler((err) => {
      const now = Date.now();
      if (now - lastErrorAt < ERROR_LOG_INTERVAL_MS) return;
      lastErrorAt = now;
      logger.warn({ err, otlp_url: options.url }, "tracing: spans could not be exported");
    });
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector) win over the default name.
    const resource = defaultResource()
      .merge(resourceFromAttributes({ "service.name": options.serviceName }))
      .merge(detectResources({ detectors: [envDetector] }));
    this.provider = new TracerProvider({
      resource,
      sampler: buildSampler(options.sampler, options.ratio),
      // Bounded: the batch processor drops spans beyond its queue (2048) rather than grow.
      spanProcessors: [new BatchSpanProcessor({ exporter: exporter(options) })],
    });
    this.tracer = this.provider.getTracer("radixgate");
  }

  start(
    headers: Record<string, string | string[] | undefined>,
    method: string,
    path: string,
    requestId: string,
    startedAt: number,
  ): RequestTrace {
    const parent = this.propagator.extract(ROOT_CONTEXT, headers, defaultTextMapGetter);
    const span = this.tracer.startSpan(
      `${method} ${path}`,
      {
        kind: SpanKind.SERVER,
        startTime: startedAt,
        attributes: {
          "http.request.method": method,
          "url.path": path,
          "radixgate.request_id": requestId,
        },
      },
      parent,
    );
    return new OtelRequestTrace(this.tracer, span, (child, carrier) =>
      this.propagator.inject(contextOf(child), carrier, defaultTextMapSetter),
    );
  }

  async shutdown(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    });
    try {
      await Promise.race([this.provider.shutdown().catch(() => undefined), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}

function contextOf(span: Span): Context {
  return trace.setSpan(ROOT_CONTEXT, span);
}

/** The OTel specification's sampler names (OTEL_TRACES_SAMPLER). */
function buildSampler(name: SamplerName, ratio: number): Sampler {
  switch (name) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/**
 * OTLP/HTTP, protobuf by default (the OTel specification's default protocol, the smaller body,
 * what every collector and Jaeger's OTLP port take); JSON when OTEL_EXPORTER_OTLP_PROTOCOL says
 * http/json. Both come from the same exporter family and share its transport; headers, timeout
 * and compression come from the OTEL_EXPORTER_OTLP_* variables the exporter reads itself.
 */
function exporter(options: TracingOptions): SpanExporter {
  return options.protocol === "http/json"
    ? new JsonExporter({ url: options.url })
    : new ProtobufExporter({ url: options.url });
}
