import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { tracingOptions } from "../../src/tracing/settings.js";

describe("tracing settings (--otlp-endpoint and the OTEL_* variables)", () => {
  it("is off with neither the flag nor an OTLP endpoint variable", () => {
    expect(tracingOptions({ otlpEndpoint: undefined }, {})).toBeUndefined();
    expect(
      tracingOptions(
        { otlpEndpoint: undefined },
        { OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" },
      ),
    ).toBeUndefined();
  });

  it("appends /v1/traces to a base URL (the flag, OTEL_EXPORTER_OTLP_ENDPOINT) and keeps a traces URL as given", () => {
    expect(tracingOptions({ otlpEndpoint: "http://c:4318" }, {})?.url).toBe(
      "http://c:4318/v1/traces",
    );
    expect(tracingOptions({ otlpEndpoint: "http://c:4318/v1/traces" }, {})?.url).toBe(
      "http://c:4318/v1/traces",
    );
    expect(
      tracingOptions(
        { otlpEndpoint: undefined },
        { OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/otel/" },
      )?.url,
    ).toBe("http://c:4318/otel/v1/traces");
    expect(
      tracingOptions(
        { otlpEndpoint: undefined },
        {
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://c:9/custom",
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://x",
        },
      )?.url,
    ).toBe("http://c:9/custom");
  });

  it("reads the service name, protocol and sampler; defaults to radixgate, protobuf, parentbased_always_on", () => {
    expect(tracingOptions({ otlpEndpoint: "http://c:4318" }, {})).toEqual({
      url: "http://c:4318/v1/traces",
      protocol: "http/protobuf",
      serviceName: "radixgate",
      sampler: "parentbased_always_on",
      ratio: 1,
    });
    const options = tracingOptions(
      { otlpEndpoint: "http://c:4318" },
      {
        OTEL_SERVICE_NAME: "gw",
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
        OTEL_TRACES_SAMPLER_ARG: "0.25",
      },
    );
    expect(options).toMatchObject({ serviceName: "gw", protocol: "http/json", ratio: 0.25 });
  });

  it("stays off with OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none", () => {
    expect(
      tracingOptions({ otlpEndpoint: "http://c" }, { OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
    expect(
      tracingOptions({ otlpEndpoint: "http://c" }, { OTEL_TRACES_EXPORTER: "none" }),
    ).toBeUndefined();
  });

  it("refuses gRPC, an unknown sampler, a ratio out of [0, 1] and a non-HTTP endpoint with a clear error", () => {
    const on = { otlpEndpoint: "http://c:4318" };
    expect(() => tracingOptions(on, { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).toThrow(ConfigError);
    expect(() => tracingOptions(on, { OTEL_TRACES_SAMPLER: "xray" })).toThrow(
      /OTEL_TRACES_SAMPLER/,
    );
    expect(() => tracingOptions(on, { OTEL_TRACES_SAMPLER_ARG: "2" })).toThrow(/\[0, 1\]/);
    expect(() =>
      tracingOptions(
        { otlpEndpoint: undefined },
        { OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" },
      ),
    ).toThrow(ConfigError);
  });
});
