import { describe, expect, it } from "vitest";
import {
  CPU_TIER,
  DISK_TIER,
  GPU_TIER,
  parseTierWeights,
  tierOf,
  tierWeightsSetting,
} from "../../src/index/kv-tiers.js";

describe("KV tiers", () => {
  it("reads the engines' mediums: none and GPU on the GPU, CPU offload, anything else as disk", () => {
    expect(tierOf(null)).toBe(GPU_TIER);
    expect(tierOf("GPU")).toBe(GPU_TIER);
    expect(tierOf("CPU")).toBe(CPU_TIER);
    expect(tierOf("cpu_tier1")).toBe(CPU_TIER);
    expect(tierOf("STORAGE")).toBe(DISK_TIER);
    expect(tierOf("CPU_TIER2")).toBe(DISK_TIER);
    expect(tierOf("nvme-pool")).toBe(DISK_TIER);
  });

  it("parses --kv-tier-weights, filling left-out tiers with the defaults", () => {
    expect(parseTierWeights("gpu=1,cpu=0.8,disk=0.3")).toEqual({ gpu: 1, cpu: 0.8, disk: 0.3 });
    expect(parseTierWeights(" CPU = 0.5 ")).toEqual({ gpu: 1, cpu: 0.5, disk: 0.3 });
    expect(parseTierWeights("cpu=0,disk=0")).toEqual({ gpu: 1, cpu: 0, disk: 0 });
    expect(tierWeightsSetting("disk=0.1", "--kv-tier-weights")).toBe("gpu=1,cpu=0.8,disk=0.1");
  });

  it.each([
    ["tpu=1", /unknown tier "tpu"/],
    ["cpu=0.5,cpu=0.4", /names the tier "cpu" twice/],
    ["cpu=1.5", /tier "cpu" must weigh a number in \[0, 1\], got "1.5"/],
    ["cpu", /tier "cpu" must weigh a number/],
    ["disk=x", /tier "disk" must weigh a number/],
    ["gpu=0,cpu=0,disk=0", /gpu must weigh more than 0/],
    ["cpu=0.2,disk=0.5", /gpu >= cpu >= disk/],
  ])("refuses %s with a clear error naming the flag", (raw, message) => {
    expect(() => parseTierWeights(raw)).toThrow(message);
    expect(() => parseTierWeights(raw)).toThrow(/^--kv-tier-weights /);
  });
});
