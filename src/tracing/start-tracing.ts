import type { Logger } from "../logger.js";
import type { Tracing } from "./request-trace.js";
import type { TracingOptions } from "./settings.js";

/**
 * Starts OpenTelemetry tracing when it is on. The SDK is imported here, on demand: with tracing
 * off no @opentelemetry module is ever loaded (test/tracing/tracing-off.test.ts checks it).
 */
export async function startTracing(
  options: TracingOptions | undefined,
  logger: Logger,
): Promise<Tracing | undefined> {
  if (options === undefined) return undefined;
  const { OtelTracing } = await import("./otel-tracing.js");
  const tracing = new OtelTracing(options, logger);
  logger.info(
    { otlp_url: options.url, protocol: options.protocol, sampler: options.sampler },
    "tracing on",
  );
  return tracing;
}
