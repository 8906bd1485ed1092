import { describe, expect, it } from "vitest";
import {
  ExpositionError,
  meanOf,
  parseExposition,
  sumOf,
} from "../../src/engines/prometheus-text.js";
import { SGLANG_METRICS, VLLM_DP2_METRICS } from "./samples.js";

describe("parseExposition", () => {
  it("reads gauges and counters with their labels; histograms are left out", () => {
    const families = parseExposition(VLLM_DP2_METRICS);
    expect(families.get("vllm:num_requests_waiting")).toEqual([
      { labels: { engine: "0", model_name: "meta-llama/Llama-3.1-8B-Instruct" }, value: 4 },
      { labels: { engine: "1", model_name: "meta-llama/Llama-3.1-8B-Instruct" }, value: 1 },
    ]);
    expect(families.get("vllm:prompt_tokens_total")?.[0]?.value).toBe(12345);
    expect(families.has("vllm:time_to_first_token_seconds")).toBe(false);
  });

  it("keeps both groups of a family printed twice (each rank's series after the other's)", () => {
    const text = 'q{engine="0"} 1.0\nr{engine="0"} 2.0\nq{engine="1"} 3.0\nr{engine="1"} 4.0\n';
    expect(sumOf(parseExposition(text), "q")).toBe(4);
    expect(
      parseExposition(text)
        .get("r")
        ?.map((s) => s.labels.engine),
    ).toEqual(["0", "1"]);
  });

  it("reads exponent notation", () => {
    expect(sumOf(parseExposition(SGLANG_METRICS), "sglang:prompt_tokens_total")).toBe(1_000_000);
  });

  it.each([
    ["an HTML error page", "<html><body>502 Bad Gateway</body></html>"],
    ["JSON", '{"detail":"Not Found"}'],
    ["an empty body", ""],
    ["an unterminated label", 'vllm:num_requests_waiting{model_name="m} 1'],
  ])("refuses %s with an ExpositionError", (_what, text) => {
    expect(() => parseExposition(text)).toThrow(ExpositionError);
  });

  it("sums and averages over series, trying names in order", () => {
    const families = parseExposition(VLLM_DP2_METRICS);
    expect(sumOf(families, "vllm:num_requests_running")).toBe(5);
    expect(meanOf(families, "vllm:missing", "vllm:kv_cache_usage_perc")).toBe(0.375);
    expect(sumOf(families, "vllm:missing")).toBeUndefined();
  });
});
