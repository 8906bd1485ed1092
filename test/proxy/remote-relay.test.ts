import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import type { Attempt } from "../../src/proxy/attempt.js";
import { Cancel } from "../../src/proxy/cancel.js";
import type { ForwardRequest } from "../../src/proxy/forward-contract.js";
import { RELAY_VALUES, RemoteRelays } from "../../src/proxy/remote-relay.js";
import type { Worker } from "../../src/workers/worker.js";

/** A decision call's response: what the relays write on it. */
function reply() {
  const written: { status?: number; headers: Map<string, string> } = { headers: new Map() };
  const res = {
    headersSent: false,
    destroyed: false,
    getHeader: () => undefined,
    writeHead(status: number, list: (string | number)[]) {
      written.status = status;
      for (let i = 0; i < list.length; i += 2)
        written.headers.set(String(list[i]), String(list[i + 1]));
      res.headersSent = true;
      return res;
    },
    end: () => res,
  };
  return { res: res as unknown as ServerResponse, written };
}

const worker = {
  id: "w1",
  url: "http://127.0.0.1:9",
  basePath: "",
  engine: "sglang",
  authorization: undefined,
} as unknown as Worker;

/** An attempt whose body the engine's priority rewrites (so the relay fetches it by key). */
function attempt(): Attempt {
  return {
    worker,
    controller: new Cancel(),
    enginePriority: 5,
    readUsage: false,
    route: "lowest_cost",
    explain: undefined,
    traced: (h: Record<string, string | string[]>) => h,
    headersArrived: () => {},
    firstByte: () => {},
    end: () => {},
  } as unknown as Attempt;
}

function request(prompt: string): ForwardRequest {
  return {
    requestId: "same-id",
    startedAt: Date.now(),
    path: "/v1/completions",
    routing: { body: Buffer.from(JSON.stringify({ model: "m", prompt })), answerHasUsage: true },
  } as unknown as ForwardRequest;
}

describe("RemoteRelays", () => {
  it("names each exchange by a key of its own: two requests with one request id never get each other's body", () => {
    const relays = new RemoteRelays({
      upstreamOrigin: () => "http://127.0.0.1:9",
      readsUsage: false,
      waitHeader: undefined,
      sendsWorkerAuth: false,
      firstByte: "reported",
    });
    const first = reply();
    const second = reply();
    relays.open(first.res);
    relays.open(second.res);
    const inProgress = new Set<Cancel>();
    void relays.send(
      attempt(),
      request("victim's prompt"),
      {},
      undefined,
      first.res,
      () => true,
      false,
      inProgress,
    );
    void relays.send(
      attempt(),
      request("other prompt"),
      {},
      undefined,
      second.res,
      () => true,
      false,
      inProgress,
    );
    const keyOf = (w: typeof first.written) => w.headers.get(RELAY_VALUES.rg_key) as string;
    expect(first.written.headers.get(RELAY_VALUES.rg_rid)).toBe("same-id");
    expect(second.written.headers.get(RELAY_VALUES.rg_rid)).toBe("same-id");
    expect(keyOf(first.written)).not.toBe(keyOf(second.written));
    expect(first.written.headers.get("x-accel-redirect")).toBe("@body");
    expect(relays.body(keyOf(first.written))?.toString()).toContain("victim's prompt");
    expect(relays.body(keyOf(second.written))?.toString()).toContain("other prompt");
    // The client's request id names nothing.
    expect(relays.body("same-id")).toBeUndefined();
    expect(
      relays.complete({
        key: "same-id",
        status: 200,
        upstreamStatus: 200,
        headerMs: 1,
        usage: undefined,
      }),
    ).toBe(false);
    expect(relays.pending).toBe(2);
    expect(
      relays.complete({
        key: keyOf(second.written),
        status: 200,
        upstreamStatus: 200,
        headerMs: 1,
        usage: undefined,
      }),
    ).toBe(true);
    expect(relays.pending).toBe(1);
  });
});
