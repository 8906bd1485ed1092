import { describe, expect, it } from "vitest";
import { mergeMetricsPages } from "../../src/engines/metrics-merge.js";

describe("mergeMetricsPages", () => {
  const page = (running: number) =>
    [
      "# HELP sglang:num_running_reqs Running requests.",
      "# TYPE sglang:num_running_reqs gauge",
      `sglang:num_running_reqs{model_name="m"} ${running}`,
      "# HELP sglang:e2e_latency_seconds Latency.",
      "# TYPE sglang:e2e_latency_seconds histogram",
      'sglang:e2e_latency_seconds_bucket{le="1.0"} 3',
      "sglang:e2e_latency_seconds_sum 1.5",
      "sglang:e2e_latency_seconds_count 3",
      "",
    ].join("\n");

  it("labels every series with its worker and writes each family once", () => {
    const text = mergeMetricsPages([
      { workerAddr: "http://a:1", text: page(1) },
      { workerAddr: "http://b:2", text: page(2) },
    ]);
    expect(text.split("\n")).toEqual([
      "# HELP sglang:num_running_reqs Running requests.",
      "# TYPE sglang:num_running_reqs gauge",
      'sglang:num_running_reqs{worker_addr="http://a:1",model_name="m"} 1',
      'sglang:num_running_reqs{worker_addr="http://b:2",model_name="m"} 2',
      "# HELP sglang:e2e_latency_seconds Latency.",
      "# TYPE sglang:e2e_latency_seconds histogram",
      'sglang:e2e_latency_seconds_bucket{worker_addr="http://a:1",le="1.0"} 3',
      'sglang:e2e_latency_seconds_sum{worker_addr="http://a:1"} 1.5',
      'sglang:e2e_latency_seconds_count{worker_addr="http://a:1"} 3',
      'sglang:e2e_latency_seconds_bucket{worker_addr="http://b:2",le="1.0"} 3',
      'sglang:e2e_latency_seconds_sum{worker_addr="http://b:2"} 1.5',
      'sglang:e2e_latency_seconds_count{worker_addr="http://b:2"} 3',
      "",
    ]);
  });

  it("gives an empty page for no pages, and escapes the label's value", () => {
    expect(mergeMetricsPages([])).toBe("");
    expect(mergeMetricsPages([{ workerAddr: 'x"y', text: "up 1\n" }])).toBe(
      'up{worker_addr="x\\"y"} 1\n',
    );
  });
});
