import { describe, expect, it } from "vitest";
import { rankEndpoint } from "../../src/kv-events/rank-endpoint.js";

describe("a data-parallel rank's endpoint (the engines' offset_endpoint_port)", () => {
  it("moves a tcp:// port up by the rank; rank 0 keeps it", () => {
    expect(rankEndpoint("tcp://10.0.0.1:5557", 0)).toBe("tcp://10.0.0.1:5557");
    expect(rankEndpoint("tcp://10.0.0.1:5557", 3)).toBe("tcp://10.0.0.1:5560");
    expect(rankEndpoint("tcp://[::1]:5557", 1)).toBe("tcp://[::1]:5558");
  });

  it("has none for ipc:// (vLLM refuses it with a rank) or a port past 65535", () => {
    expect(rankEndpoint("ipc:///tmp/kv", 1)).toBeUndefined();
    expect(rankEndpoint("ipc:///tmp/kv", 0)).toBe("ipc:///tmp/kv");
    expect(rankEndpoint("tcp://h:65535", 1)).toBeUndefined();
  });
});
