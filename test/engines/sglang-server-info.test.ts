import { describe, expect, it } from "vitest";
import { readSglangServerInfo } from "../../src/engines/sglang-server-info.js";
import { SGLANG_SERVER_INFO } from "./samples.js";

describe("readSglangServerInfo", () => {
  it("counts one KV pool per DP rank, and says how many ranks", () => {
    expect(readSglangServerInfo(SGLANG_SERVER_INFO)).toEqual({
      capacityTokens: 1_000_000,
      dpSize: 2,
    });
  });

  it("without dp_size, one pool", () => {
    const { dp_size: _, ...single } = SGLANG_SERVER_INFO;
    expect(readSglangServerInfo(single).capacityTokens).toBe(500_000);
  });

  it("has no capacity when max_total_num_tokens is missing or not a number", () => {
    expect(readSglangServerInfo({ model_path: "m" }).capacityTokens).toBeUndefined();
    expect(
      readSglangServerInfo({ ...SGLANG_SERVER_INFO, max_total_num_tokens: "lots" }).capacityTokens,
    ).toBeUndefined();
  });

  it("reports a capacity of 0 as 0 (the poller refuses it with a log line)", () => {
    expect(readSglangServerInfo({ max_total_num_tokens: 0 }).capacityTokens).toBe(0);
  });

  it("reads the running cap: each rank's effective cap from internal_states, else --max-running-requests, times the ranks", () => {
    expect(readSglangServerInfo(SGLANG_SERVER_INFO).maxRunningRequests).toBeUndefined();
    const effective = {
      ...SGLANG_SERVER_INFO,
      max_running_requests: 48,
      internal_states: [
        { last_gen_throughput: 0, effective_max_running_requests_per_dp: 64 },
        { last_gen_throughput: 0, effective_max_running_requests_per_dp: 64 },
      ],
    };
    expect(readSglangServerInfo(effective).maxRunningRequests).toBe(128);
    const argument = { max_running_requests: 8, internal_states: [{}] };
    expect(readSglangServerInfo(argument).maxRunningRequests).toBe(8);
    expect(readSglangServerInfo({ max_running_requests: "8" }).maxRunningRequests).toBeUndefined();
    expect(readSglangServerInfo({ max_running_requests: 0 }).maxRunningRequests).toBeUndefined();
  });

  it.each([null, [], "text", 42])("refuses %j with a TypeError", (body) => {
    expect(() => readSglangServerInfo(body)).toThrow(TypeError);
  });
});

describe("readSglangServerInfo: the priority preemption threshold", () => {
  it("is said only while the engine preempts by priority (python/sglang/srt/server_args.py)", () => {
    const args = {
      max_total_num_tokens: 1000,
      enable_priority_scheduling: true,
      disable_priority_preemption: false,
      priority_scheduling_preemption_threshold: 10,
    };
    expect(readSglangServerInfo(args).preemptionThreshold).toBe(10);
    expect(
      readSglangServerInfo({ ...args, priority_scheduling_preemption_threshold: 0 })
        .preemptionThreshold,
    ).toBe(0);
    expect(
      readSglangServerInfo({ ...args, enable_priority_scheduling: false }).preemptionThreshold,
    ).toBeUndefined();
    expect(
      readSglangServerInfo({ ...args, disable_priority_preemption: true }).preemptionThreshold,
    ).toBeUndefined();
  });
});
