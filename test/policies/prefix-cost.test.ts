import { describe, expect, it, vi } from "vitest";
import { createPolicy } from "../../src/policies/factory.js";
import { POLICY_DEFAULTS } from "../../src/policies/options.js";
import { type PrefixCostOptions, PrefixCostPolicy } from "../../src/policies/prefix-cost.js";
import { coldText, type FakeWorker, fakeWorker, fleet, selectWith } from "./fake-worker.js";

function prefixCost(overrides: Partial<PrefixCostOptions> = {}): PrefixCostPolicy {
  return new PrefixCostPolicy({ ...POLICY_DEFAULTS, ...overrides });
}

/** A fake worker with prefill work already queued on it. */
function queued(id: string, pendingPrefillChars: number, inFlight = 0): FakeWorker {
  return Object.assign(fakeWorker(id, inFlight), { pendingPrefillChars });
}

const SYSTEM = "You are a support agent for ACME. Follow the policy below. ".repeat(20); // 1200 chars
const question = (i: number) => `${SYSTEM}Question ${i}: where is my order?`;

describe("prefix_cost: the request's own uncached prefill", () => {
  it("sends a request to the worker that holds the longest prefix, at equal load", () => {
    const policy = prefixCost();
    const workers = fleet(3);
    workers[1]!.tree.insert(question(0));
    workers[2]!.tree.insert(SYSTEM.slice(0, 300));
    const decision = selectWith(policy, workers, { text: question(1) })!;
    expect(decision.worker).toBe(workers[1]);
    expect(decision.branch).toBe("lowest_cost");
    expect(decision.matchRate).toBeCloseTo(
      (SYSTEM.length + "Question ".length) / question(1).length,
      12,
    );
  });

  it("prefers any cached prefix, however short, when nothing else differs (no threshold)", () => {
    const policy = prefixCost();
    const workers = fleet(4);
    workers[3]!.tree.insert("You are");
    expect(selectWith(policy, workers, { text: question(1) })!.worker).toBe(workers[3]);
  });

  it("never counts more matched characters than the text has", () => {
    const policy = prefixCost();
    const [a, b] = fleet(2, [0, 1]) as [FakeWorker, FakeWorker];
    const decision = policy.select([a, b], { text: "abc", matched: [0, 99] })!;
    // b: 3 - 3 + 512 = 512; a: 3 - 0 = 3 → a, and b's claim never makes its cost negative.
    expect(decision.worker).toBe(a);
    const onlyClaim = policy.select([a, b], { text: "abc", matched: [99, 0] })!;
    expect(onlyClaim.worker).toBe(a);
    expect(onlyClaim.matchRate).toBe(1);
  });
});

describe("prefix_cost: prefill already queued on a worker", () => {
  it("leaves the prefix holder when the prefill queued on it exceeds what a cold worker recomputes", () => {
    const policy = prefixCost({ prefixCostQueueWeight: 1, prefixCostRequestChars: 0 });
    const text = question(1);
    const holder = queued("holder", text.length + 1);
    const cold = fakeWorker("cold");
    holder.tree.insert(text);
    // holder: 0 own + (length + 1) queued > cold: length own + 0 queued.
    expect(selectWith(policy, [holder, cold], { text })!.worker).toBe(cold);
  });

  it("stays on the prefix holder while its queue is shorter than the recompute", () => {
    const policy = prefixCost({ prefixCostQueueWeight: 1, prefixCostRequestChars: 0 });
    const text = question(1);
    const holder = queued("holder", text.length - 100);
    const cold = fakeWorker("cold");
    holder.tree.insert(text.slice(0, text.length - 10));
    expect(selectWith(policy, [holder, cold], { text })!.worker).toBe(holder);
  });

  it("by default keeps a hit on its holder behind one cold prefill of the same size (weight 0.5)", () => {
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    const text = question(1);
    // Another group's cold prompt, as long as this one, is being prefilled on the holder.
    const holder = queued("holder", text.length);
    holder.tree.insert(question(0));
    expect(selectWith(policy, [holder, fakeWorker("cold")], { text })!.worker).toBe(holder);
  });

  it("weighs the queue by --prefix-cost-queue-weight (0 ignores it)", () => {
    const text = question(1);
    const make = () => {
      const holder = queued("holder", 2 * text.length);
      holder.tree.insert(text);
      return [holder, fakeWorker("cold")] as const;
    };
    const ignoring = prefixCost({ prefixCostQueueWeight: 0, prefixCostRequestChars: 0 });
    const [h1, c1] = make();
    expect(selectWith(ignoring, [h1, c1], { text })!.worker).toBe(h1);
    const halved = prefixCost({ prefixCostQueueWeight: 0.4, prefixCostRequestChars: 0 });
    const [h2, c2] = make();
    expect(selectWith(halved, [h2, c2], { text })!.worker).toBe(h2); // 0.8 × length < length
    const full = prefixCost({ prefixCostQueueWeight: 1, prefixCostRequestChars: 0 });
    const [h3, c3] = make();
    expect(selectWith(full, [h3, c3], { text })!.worker).toBe(c3); // 2 × length > length
  });

  it("among cold workers, sends new work to the one with the least prefill queued", () => {
    const policy = prefixCost();
    const workers = [queued("a", 5000), queued("b", 200), queued("c", 900)];
    expect(selectWith(policy, workers, { text: coldText(1) })!.worker.id).toBe("b");
  });
});

describe("prefix_cost: the engine's own queue", () => {
  /** A fake worker whose engine reported `foreign` queued requests this router did not send. */
  const foreignQueue = (id: string, foreign: number | undefined) =>
    Object.assign(fakeWorker(id), { foreignQueuedAt: () => foreign, pendingPrefillChars: 0 });

  it("counts requests queued at the engine that this router did not send, each as long as this one", () => {
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    const text = question(1);
    // Three foreign requests queued at the holder: 0.5 × 3 × length > a cold worker's length.
    const holder = foreignQueue("holder", 3);
    holder.tree.insert(text);
    expect(selectWith(policy, [holder, fakeWorker("cold")], { text })!.worker.id).toBe("cold");
    // No foreign work (or no fresh report): the holder keeps its request.
    for (const foreign of [0, undefined]) {
      const quiet = foreignQueue("quiet", foreign);
      quiet.tree.insert(text);
      expect(selectWith(policy, [quiet, fakeWorker("cold")], { text })!.worker.id).toBe("quiet");
    }
  });

  it("reads the clock once per decision: every candidate's report is judged at the same instant", () => {
    const policy = prefixCost();
    const asked: number[] = [];
    const workers = fleet(3).map((w) =>
      Object.assign(w, {
        foreignQueuedAt: (now: number) => {
          asked.push(now);
          return 0;
        },
      }),
    );
    // A clock that moves at every read: a policy reading it per candidate would pass three instants.
    let clock = 1_000;
    const now = vi.spyOn(Date, "now").mockImplementation(() => clock++);
    try {
      selectWith(policy, workers, { text: coldText(1) });
    } finally {
      now.mockRestore();
    }
    expect(asked).toHaveLength(3);
    expect(new Set(asked).size).toBe(1);
  });
});

describe("prefix_cost: requests in flight", () => {
  it("counts --prefix-cost-request-chars for each in-flight request", () => {
    const text = question(1);
    const holder = fakeWorker("holder", 3);
    const cold = fakeWorker("cold", 0);
    holder.tree.insert(text);
    // 3 × 512 = 1536 > length (about 1230): the cold worker is cheaper.
    expect(text.length).toBeLessThan(3 * 512);
    expect(
      selectWith(prefixCost({ prefixCostRequestChars: 512 }), [holder, cold], { text })!.worker,
    ).toBe(cold);
    const fresh = fakeWorker("holder", 3);
    fresh.tree.insert(text);
    const cheapRequests = prefixCost({ prefixCostRequestChars: 100 });
    expect(selectWith(cheapRequests, [fresh, fakeWorker("cold")], { text })!.worker).toBe(fresh);
  });

  it("spreads one hot prefix over several workers as their loads grow (closed loop)", () => {
    const policy = prefixCost();
    const workers = fleet(4);
    // Requests arrive and stay in flight: the first worker takes the prefix, then others join.
    for (let i = 0; i < 24; i++)
      selectWith(policy, workers, { text: question(i) })!.worker.inFlight++;
    const loads = workers.map((w) => w.inFlight);
    expect(Math.max(...loads)).toBeLessThan(24);
    expect(loads.filter((l) => l > 0).length).toBeGreaterThan(1);
  });

  it("prefers the less loaded worker when costs are equal, and takes turns when loads are equal too", () => {
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    const workers = fleet(3, [2, 0, 1]);
    expect(selectWith(policy, workers, { text: coldText(1) })!.worker.id).toBe("w1");
    const equal = fleet(3);
    const picked = [0, 1, 2].map((i) => selectWith(policy, equal, { text: coldText(10 + i) })!);
    expect(new Set(picked.map((d) => d.worker.id)).size).toBe(3);
  });

  it("with empty text, routes by queue and load alone and reports a match rate of 0", () => {
    const policy = prefixCost();
    const workers = [queued("a", 0, 2), queued("b", 0, 1), queued("c", 700, 0)];
    const decision = selectWith(policy, workers, { text: "" })!;
    expect(decision.worker.id).toBe("b"); // a: 2 × 256, b: 256, c: 0.5 × 700
    expect(decision.matchRate).toBe(0);
  });
});

describe("prefix_cost: configuration", () => {
  it("is built by the factory with the configured weights, and refuses negative ones", () => {
    expect(createPolicy("prefix_cost").name).toBe("prefix_cost");
    expect(() => createPolicy("prefix_cost", { prefixCostQueueWeight: -1 })).toThrow(
      /prefixCostQueueWeight/,
    );
    expect(() => createPolicy("prefix_cost", { prefixCostRequestChars: Number.NaN })).toThrow(
      /prefixCostRequestChars/,
    );
  });
});
