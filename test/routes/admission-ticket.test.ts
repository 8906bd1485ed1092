import { describe, expect, it } from "vitest";
import { TenantTable } from "../../src/admission/identity.js";
import { routeOptions } from "../../src/assembly/routes.js";
import { configWith } from "../../src/config.js";
import { Intake, type IntakeOptions, type ReceivedRequest } from "../../src/intake/intake.js";
import { Cancel } from "../../src/proxy/cancel.js";
import { admissionTicket } from "../../src/routes/admission-ticket.js";
import { WorkerRegistry } from "../../src/workers/registry.js";

const OPTIONS: IntakeOptions = {
  body: { maxBytes: 1 << 20, totalTimeoutMs: 5_000, idleTimeoutMs: 5_000, minBytesPerSec: 0 },
  parseOffloadBytes: 1 << 20,
  maxRoutingTextChars: 100_000,
  withTokenizeInput: false,
  sessionAffinity: "off",
  sessionHeader: "x-session-id",
  modelRouting: "engine",
  identity: { tenantHeader: "x-tenant-id", priorityHeader: "x-priority" },
};

/** An Intake that records every method called on it after `watching` is set. */
function watchedIntake(registry: WorkerRegistry) {
  const calls: string[] = [];
  const state = { watching: false };
  const real = new Intake(OPTIONS, registry, undefined, new TenantTable(8));
  const intake = new Proxy(real, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver);
      if (state.watching && typeof value === "function") calls.push(String(key));
      return value;
    },
  });
  return { intake, calls, state };
}

describe("admission's ticket (the request's path never returns to a folder it has left)", () => {
  it("works out tenant, candidates, cost and timeout without calling back into intake", () => {
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 3, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
    });
    registry.add("http://10.0.0.7:30000");
    const { intake, calls, state } = watchedIntake(registry);
    const received: ReceivedRequest = {
      endpoint: "chat",
      body: Buffer.from("{}"),
      summary: {
        text: "x".repeat(400),
        model: undefined,
        stream: false,
        usageDescribesText: true,
        maxTokens: 16,
      },
      session: undefined,
      headers: { "x-tenant-id": "acme", "x-priority": "2", "x-queue-timeout-secs": "3" },
    };
    const config = routeOptions(
      configWith({ queueTimeoutSecs: 30, queueTimeoutHeader: "x-queue-timeout-secs" }),
    );
    const ticket = admissionTicket(
      { config, intake, registry } as unknown as Parameters<typeof admissionTicket>[0],
      received,
      new Cancel(),
    );
    state.watching = true;
    expect(ticket.identity()).toMatchObject({ tenant: "acme", priority: 2 });
    expect(ticket.candidates()).toEqual(registry.candidates());
    expect(ticket.cost()).toBe(100 + 16);
    expect(ticket.timeoutMs()).toBe(3000);
    expect(calls).toEqual([]);
  });
});

describe("admission's ticket identity", () => {
  it("is read once per request, however many steps ask (a bearer key is hashed once)", () => {
    const registry = new WorkerRegistry({
      breaker: { failureThreshold: 3, openMs: 1000, successThreshold: 1 },
      connectTimeoutMs: 1000,
    });
    const tenants = new TenantTable(8);
    let admits = 0;
    const admit = tenants.admit.bind(tenants);
    tenants.admit = (name: string) => {
      admits += 1;
      return admit(name);
    };
    const intake = new Intake(OPTIONS, registry, undefined, tenants);
    const received: ReceivedRequest = {
      endpoint: "chat",
      body: Buffer.from("{}"),
      summary: undefined,
      session: undefined,
      headers: { authorization: "Bearer sk-1", "x-priority": "3" },
    };
    const config = routeOptions(configWith({}));
    const ticket = admissionTicket(
      { config, intake, registry } as unknown as Parameters<typeof admissionTicket>[0],
      received,
      new Cancel(),
    );
    const first = ticket.identity();
    expect(ticket.identity()).toBe(first);
    expect(first.priority).toBe(3);
    expect(admits).toBe(1);
  });
});
