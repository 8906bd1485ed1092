import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { sessionKey } from "../../src/intake/session-key.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { SessionTable } from "../../src/scheduling/session-table.js";

function setup(policy: "cache_aware" | "round_robin" = "round_robin") {
  const index = new ApproximateIndex();
  const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0 }));
  for (const w of workers) index.addWorker(w.id);
  const sessions = new SessionTable(100);
  return {
    index,
    workers,
    sessions,
    decider: new Scheduler(createPolicy(policy), index, sessions),
  };
}

describe("session affinity", () => {
  it("keeps a session on its first worker while it is a candidate (branch session)", () => {
    const { workers, decider } = setup("round_robin");
    const first = decider.decide(workers, { text: "turn 1", session: "conv-1" })!;
    for (let turn = 2; turn <= 6; turn++) {
      // Other traffic moves round_robin along; the session does not follow it.
      decider.decide(workers, { text: "other" });
      const next = decider.decide(workers, { text: `turn ${turn}`, session: "conv-1" })!;
      expect(next.worker.id).toBe(first.worker.id);
      expect(next.branch).toBe("session");
    }
  });

  it("a session whose worker is gone is routed by the policy and then sticks to the new one", () => {
    const { workers, decider } = setup("round_robin");
    const first = decider.decide(workers, { text: "t", session: "s" })!;
    const others = workers.filter((w) => w !== first.worker);
    const moved = decider.decide(others, { text: "t2", session: "s" })!;
    expect(moved.worker.id).not.toBe(first.worker.id);
    expect(moved.branch).not.toBe("session");
    expect(decider.decide(workers, { text: "t3", session: "s" })!.worker.id).toBe(moved.worker.id);
  });

  it("composes with the prefix index: the sticky worker's match rate is reported and the text inserted", () => {
    const { index, workers, decider } = setup("cache_aware");
    const system = "You are a careful assistant. ".repeat(4);
    index.insert("c", undefined, `${system}earlier`);
    const first = decider.decide(workers, { text: `${system}q1`, session: "s" })!;
    expect(first.worker.id).toBe("c");
    const second = decider.decide(workers, { text: `${system}q1 and q2`, session: "s" })!;
    expect(second).toMatchObject({ branch: "session", index: "approx" });
    expect(second.worker.id).toBe("c");
    expect(second.matchRate).toBeGreaterThan(0.5);
    expect(index.treeOf("c")!.match(`${system}q1 and q2`)).toBe(`${system}q1 and q2`.length);
  });

  it("requests without a session are routed by the policy alone", () => {
    const { workers, decider, sessions } = setup("round_robin");
    const ids = [0, 1, 2].map(() => decider.decide(workers, { text: "x" })!.worker.id);
    expect(new Set(ids).size).toBe(3);
    expect(sessions.size).toBe(0);
  });

  it("the table is bounded: the least recently used session is forgotten first", () => {
    const table = new SessionTable(2);
    table.bind("s1", "a");
    table.bind("s2", "b");
    expect(table.workerFor("s1")).toBe("a"); // read does not refresh; bind does
    table.bind("s1", "a");
    table.bind("s3", "c");
    expect(table.size).toBe(2);
    expect(table.workerFor("s2")).toBeUndefined();
    expect(table.workerFor("s1")).toBe("a");
    expect(() => new SessionTable(0)).toThrow(RangeError);
  });

  it("session ids come from the configured header or the user field, never from an empty or huge value", () => {
    expect(sessionKey("header", "x-session-id", { "x-session-id": "c1" }, undefined)).toBe("c1");
    expect(sessionKey("header", "x-conv", { "x-session-id": "c1" }, undefined)).toBeUndefined();
    expect(sessionKey("user", "x-session-id", {}, "u-42")).toBe("u-42");
    expect(sessionKey("off", "x-session-id", { "x-session-id": "c1" }, "u")).toBeUndefined();
    expect(sessionKey("header", "x-session-id", { "x-session-id": "" }, undefined)).toBeUndefined();
    expect(
      sessionKey("header", "x-session-id", { "x-session-id": "x".repeat(300) }, undefined),
    ).toBeUndefined();
  });
});
