import { describe, expect, it } from "vitest";
import { WorkerRegistry } from "../../src/workers/registry.js";
import { bootstrapPortFrom, roleFrom } from "../../src/workers/worker-role.js";

const OPTIONS = {
  breaker: { failureThreshold: 3, openMs: 1000, successThreshold: 1 },
  connectTimeoutMs: 1000,
};

describe("worker roles (issue 25: prefill/decode disaggregation)", () => {
  it("reads SGLang's worker_type and bootstrap_port; regular when neither is given", () => {
    expect(roleFrom(undefined, undefined)).toEqual({ type: "regular", bootstrapPort: null });
    expect(roleFrom("prefill", 8998)).toEqual({ type: "prefill", bootstrapPort: 8998 });
    expect(roleFrom("prefill", "none")).toEqual({ type: "prefill", bootstrapPort: null });
    expect(roleFrom("prefill", "9000")).toEqual({ type: "prefill", bootstrapPort: 9000 });
    expect(roleFrom("decode", null)).toEqual({ type: "decode", bootstrapPort: null });
  });

  it("says what is wrong with a bad type or port", () => {
    expect(roleFrom("encode", undefined)).toMatch(
      /worker_type must be one of regular, prefill, decode/,
    );
    expect(roleFrom("decode", 8998)).toMatch(/bootstrap_port is for prefill workers only/);
    expect(bootstrapPortFrom(70000)).toMatch(/bootstrap_port must be a port number/);
    expect(bootstrapPortFrom("8998x")).toMatch(/bootstrap_port must be a port number/);
    expect(bootstrapPortFrom(1.5)).toMatch(/bootstrap_port must be a port number/);
  });

  it("the registry keeps each worker's role, lists candidates per side, and shows it", () => {
    const registry = new WorkerRegistry(OPTIONS);
    const p = registry.add("http://127.0.0.1:7001", {
      role: { type: "prefill", bootstrapPort: 8998 },
    });
    const d = registry.add("http://127.0.0.1:7002", {
      role: { type: "decode", bootstrapPort: null },
    });
    const r = registry.add("http://127.0.0.1:7003");
    expect(registry.candidates(undefined, "prefill")).toEqual([p]);
    expect(registry.candidates(undefined, "decode")).toEqual([d]);
    expect(registry.candidates(new Set([p]))).toEqual([d, r]);
    expect(p.toJSON()).toMatchObject({ worker_type: "prefill", bootstrap_port: 8998 });
    expect(d.toJSON()).toMatchObject({ worker_type: "decode", bootstrap_port: null });

    // A regular worker says so, as SGLang's WorkerInfo does.
    expect(r.toJSON()).toMatchObject({ worker_type: "regular" });
    void registry.close();
  });
});
