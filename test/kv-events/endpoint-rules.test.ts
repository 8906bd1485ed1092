/**
 * Issue 20 item 5: KV-event endpoints given to POST /workers are checked by the worker-URL rules
 * (no link-local or metadata host in any spelling, sane ports, ipc:// only behind a flag) before
 * the router connects to them; a refused endpoint leaves no worker registered.
 */
import { describe, expect, it } from "vitest";
import { checkKvEndpoint, type KvEndpointRules } from "../../src/kv-events/endpoint-rules.js";

const rules = (overrides: Partial<KvEndpointRules> = {}): KvEndpointRules => ({
  allowIpc: false,
  allowLinkLocal: false,
  resolveHost: async (name) => (name === "evil.example" ? ["169.254.169.254"] : ["10.0.0.9"]),
  ...overrides,
});

async function refusal(endpoint: string, r = rules()): Promise<string | undefined> {
  try {
    await checkKvEndpoint(endpoint, "kv_events_endpoint", r);
    return undefined;
  } catch (err) {
    return (err as Error).message;
  }
}

describe("KV-event endpoint rules: names resolved (issue 20 item 5)", () => {
  it("a host name that resolves to a link-local address is refused, unless --allow-link-local-workers", async () => {
    expect(await refusal("tcp://evil.example:5557")).toMatch(/evil\.example resolves to 169/);
    expect(await refusal("tcp://gpu1.example:5557")).toBeUndefined();
    expect(
      await refusal("tcp://evil.example:5557", rules({ allowLinkLocal: true })),
    ).toBeUndefined();
    expect(await refusal("tcp://[fe80::1]:5557", rules({ allowLinkLocal: true }))).toBeUndefined();
  });
});
