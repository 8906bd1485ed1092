import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { buildProfiles } from "../../src/scheduling/scheduler-config.js";
import { SessionTable } from "../../src/scheduling/session-table.js";

/** A profile weighing session affinity (1) against in-flight load (2). */
function sessionProfile() {
  return buildProfiles(
    {
      plugins: [{ type: "session-affinity-scorer" }, { type: "active-request-scorer" }],
      schedulingProfiles: [
        {
          name: "sessions-weighed",
          plugins: [
            { pluginRef: "session-affinity-scorer", weight: 1 },
            { pluginRef: "active-request-scorer", weight: 2 },
          ],
        },
      ],
    },
    { random: () => 0.5 },
  )[0]!;
}

describe("the decider with a scheduling profile", () => {
  it("passes the session's worker to a profile that weighs sessions, instead of pinning it", () => {
    const index = new ApproximateIndex();
    const workers = ["a", "b"].map((id) => ({ id, inFlight: 0 }));
    for (const w of workers) index.addWorker(w.id);
    const decider = new Scheduler(sessionProfile(), index, new SessionTable(10));
    const first = decider.decide(workers, { text: "turn 1", session: "s" })!;
    expect(first.branch).not.toBe("session");
    // Equal loads: the session's worker wins on the session score.
    expect(decider.decide(workers, { text: "turn 2", session: "s" })!.worker).toBe(first.worker);
    // The session's worker much busier: load outweighs affinity (2 > 1); a plain policy would pin.
    (first.worker as { inFlight: number }).inFlight = 10;
    const moved = decider.decide(workers, { text: "turn 3", session: "s" })!;
    expect(moved.worker).not.toBe(first.worker);
    expect(moved.branch).toBe("max_score");
  });

  it("explains the profile's verdicts through the decider, with the session's score", () => {
    const index = new ApproximateIndex();
    const workers = ["a", "b"].map((id) => ({ id, inFlight: 0 }));
    for (const w of workers) index.addWorker(w.id);
    const sessions = new SessionTable(10);
    sessions.bind("s", "b");
    const decider = new Scheduler(sessionProfile(), index, sessions);
    expect(decider.profile).toBe("sessions-weighed");
    const { profile, decision } = decider.explain(workers, { text: "hi", session: "s" });
    expect(decision?.worker.id).toBe("b");
    expect(profile?.candidates.map((c) => c.scores["session-affinity-scorer"]?.score)).toEqual([
      0, 1,
    ]);
  });

  it("issue 26: names a filter as the reason when a profile's filter removed the best holder", () => {
    const profile = buildProfiles(
      {
        plugins: [{ type: "health-filter" }, { type: "prefix-cache-scorer" }],
        schedulingProfiles: [
          {
            name: "healthy-prefix",
            plugins: [
              { pluginRef: "health-filter" },
              { pluginRef: "prefix-cache-scorer", weight: 1 },
            ],
          },
        ],
      },
      { random: () => 0.5 },
    )[0]!;
    const index = new ApproximateIndex();
    const workers = [
      { id: "a", inFlight: 0 },
      { id: "b", inFlight: 0, available: false },
    ];
    for (const w of workers) index.addWorker(w.id);
    index.insert("b", undefined, "a long shared system prompt");
    const decider = new Scheduler(profile, index);
    const decision = decider.decide(workers, { text: "a long shared system prompt, then" })!;
    expect(decision.worker.id).toBe("a");
    expect(decision.available).toBe("a long shared system prompt".length);
    expect(decision.lossReason).toBe("filter");
  });
});
