import { describe, expect, it } from "vitest";
import { startCpuNoise } from "../../bench/lib/cpu-noise.js";

describe("bench --cpu-noise", () => {
  it("starts a neighbour process and stops it", async () => {
    const noise = startCpuNoise(7);
    expect(noise.pid).toBeGreaterThan(0);
    expect(() => process.kill(noise.pid!, 0)).not.toThrow();
    await noise.stop();
    // Gone (signal 0 only asks whether the process exists).
    expect(() => process.kill(noise.pid!, 0)).toThrow();
    await noise.stop();
  });
});
