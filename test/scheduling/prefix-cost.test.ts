import { describe, expect, it, vi } from "vitest";
import { createPolicy, PrefixCostPolicy } from "../../src/scheduling/builtin-profiles.js";
import {
  DEFAULT_CHURN_HALF_LIFE,
  POLICY_DEFAULTS,
  SUGGESTED_CHURN_HALF_LIFE,
} from "../../src/scheduling/options.js";
import { Churn, type PrefixCostOptions } from "../../src/scheduling/prefix-cost.js";
import {
  coldText,
  type FakeWorker,
  fakeWorker,
  fleet,
  seededRandom,
  selectWith,
} from "./fake-worker.js";

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

  it("counts the prefill other replicas queued there as its own (a new tenant goes elsewhere)", () => {
    const policy = prefixCost({ prefixCostQueueWeight: 1, prefixCostRequestChars: 0 });
    const text = question(1);
    // Both hold the shared system prompt; a peer just queued a new tenant's prefill on the first.
    const [first, second] = [fakeWorker("first"), fakeWorker("second")];
    first.tree.insert(SYSTEM);
    second.tree.insert(SYSTEM);
    Object.assign(first, { peerPendingPrefillChars: 3000, peerPendingPrefillRequests: 1 });
    expect(selectWith(policy, [first, second], { text })!.worker).toBe(second);
    Object.assign(first, { peerPendingPrefillChars: 0, peerPendingPrefillRequests: 0 });
    Object.assign(second, { peerPendingPrefillChars: 3000, peerPendingPrefillRequests: 1 });
    expect(selectWith(policy, [first, second], { text })!.worker).toBe(first);
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

describe("prefix_cost: near-equal costs (--prefix-cost-tie-break, issue 27)", () => {
  const PREAMBLE = "Tools: search(query), fetch(url), calendar(date). Answer briefly. ".repeat(30);
  const tenant = (t: number, turn: number) =>
    `${PREAMBLE}Tenant ${t} ${"policy text of this tenant ".repeat(8)}${t}\nUser: question ${turn}`;

  /** Four workers that all hold the shared preamble, with a little prefill queued on each. */
  function preambleFleet(queuedChars: readonly number[]): FakeWorker[] {
    return queuedChars.map((chars, i) => {
      const w = queued(`w${i}`, chars);
      w.tree.insert(PREAMBLE);
      return w;
    });
  }

  it("sends a new tenant to the same worker whatever small differences of load there are at that instant", () => {
    // Differences of up to 200 queued characters (100 at weight 0.5, under half of one in-flight
    // request's 256): the rotation and the lowest cost picked whichever worker was a little idler.
    const patterns = [
      [0, 0, 0, 0],
      [200, 0, 100, 50],
      [0, 200, 50, 100],
      [100, 50, 0, 200],
      [50, 100, 200, 0],
    ];
    for (let t = 0; t < 8; t++) {
      const chosen = new Set<string>();
      for (const pattern of patterns) {
        const policy = prefixCost();
        // Earlier decisions move the rotation: the choice must not depend on it either.
        for (let skip = 0; skip < t; skip++) policy.select(fleet(4), { text: coldText(skip) });
        chosen.add(
          policy.select(preambleFleet(pattern), {
            text: tenant(t, 1),
            matched: [PREAMBLE.length, PREAMBLE.length, PREAMBLE.length, PREAMBLE.length],
          })!.worker.id,
        );
      }
      expect(chosen.size, `tenant ${t}`).toBe(1);
    }
  });

  it("spreads different tenants over the workers, and sends a tenant's next conversations after the first", () => {
    const policy = prefixCost();
    const workers = preambleFleet([0, 0, 0, 0]);
    const pending = (w: FakeWorker) => w as { pendingPrefillChars: number };
    /** Plays the forwarder: the chosen worker has the uncached part queued until it is done. */
    const route = (text: string) => {
      const matched = workers.map((w) => w.tree.match(text));
      const decision = policy.select(workers, { text, matched })!;
      pending(decision.worker).pendingPrefillChars +=
        text.length - matched[workers.indexOf(decision.worker)]!;
      decision.worker.tree.insert(text);
      return decision.worker.id;
    };
    const homes = new Map<number, string>();
    for (let t = 0; t < 16; t++) homes.set(t, route(tenant(t, 1)));
    expect(new Set(homes.values()).size).toBe(4);
    // Everything done; a second conversation of each tenant finds its prompt where the first went.
    for (const w of workers) pending(w).pendingPrefillChars = 0;
    for (let t = 0; t < 16; t++) expect(route(tenant(t, 2))).toBe(homes.get(t));
  });

  it("among near-equal costs, prefers the worker holding more of the text", () => {
    const policy = prefixCost();
    const text = tenant(3, 1);
    // w2 holds 300 characters more but has 700 characters more queued (350 at weight 0.5): its
    // cost is 50 above the others', a near tie, and it holds more of the text.
    const workers = preambleFleet([0, 0, 700, 0]);
    workers[2]!.tree.insert(text.slice(0, PREAMBLE.length + 300));
    expect(selectWith(policy, workers, { text })!.worker.id).toBe("w2");
  });

  it("still leaves a worker whose cost is more than half an in-flight request above the lowest", () => {
    const text = tenant(5, 1);
    const home = selectWith(prefixCost(), preambleFleet([0, 0, 0, 0]), { text })!.worker.id;
    const loads = [0, 0, 0, 0];
    loads[Number(home.slice(1))] = 400; // 200 at weight 0.5 > 128
    expect(selectWith(prefixCost(), preambleFleet(loads), { text })!.worker.id).not.toBe(home);
  });

  it("replicas deciding the same tie at once take different workers (each rotation starts at its rank's place)", () => {
    const pick = (rank: number, text: string, busy?: number) => {
      const workers = fleet(4);
      if (busy !== undefined) {
        Object.assign(workers[busy]!, { pendingPrefillChars: 20_000 });
        workers[busy]!.tree.insert(PREAMBLE);
      }
      return selectWith(prefixCost(), workers, { text, replicaRank: rank })!.worker.id;
    };
    // Nothing held anywhere: every replica's first decision.
    expect([0, 1, 2, 3].map((rank) => pick(rank, tenant(1, 1)))).toEqual(["w0", "w2", "w1", "w3"]);
    // One busy holder of the preamble; the others tie holding nothing (a key at the text's start,
    // the same for every tenant): each replica its own worker, the same for every such text.
    expect(new Set([0, 1].map((rank) => pick(rank, tenant(2, 1), 0))).size).toBe(2);
    for (const rank of [0, 1]) {
      const homes = new Set([2, 3, 4, 5].map((t) => pick(rank, tenant(t, 1), 0)));
      expect(homes.size, `rank ${rank}`).toBe(1);
      expect(homes.has("w0")).toBe(false);
    }
    // Alone (rank 0, or none given) as before.
    expect(pick(0, tenant(1, 1))).toBe(
      selectWith(prefixCost(), fleet(4), { text: tenant(1, 1) })!.worker.id,
    );
  });

  it("with --prefix-cost-tie-break rotation, the lowest cost wins at once, as before", () => {
    const policy = prefixCost({ prefixCostTieBreak: "rotation" });
    const picked = [0, 1, 2, 3].map((i) => {
      const loads = [50, 50, 50, 50];
      loads[i] = 0;
      return selectWith(policy, preambleFleet(loads), { text: tenant(1, 1) })!.worker.id;
    });
    expect(picked).toEqual(["w0", "w1", "w2", "w3"]);
    expect(() => createPolicy("prefix_cost", { prefixCostTieBreak: "first" as never })).toThrow(
      /prefixCostTieBreak/,
    );
  });
});

describe("prefix_cost with queue weight 0: the load cap", () => {
  const text = question(1);
  const holderWith = (inFlight: number) => {
    const holder = queued("holder", 0, inFlight);
    holder.tree.insert(text);
    return holder;
  };

  it("keeps sending to the holder while its load is within --cache-load-bound × the mean + 1", () => {
    const policy = prefixCost({ prefixCostQueueWeight: 0, cacheLoadBound: 2 });
    const holder = holderWith(3);
    const cold = [fakeWorker("a", 1), fakeWorker("b", 1), fakeWorker("c", 1)];
    // Mean 1.5: cap 4.
    expect(selectWith(policy, [holder, ...cold], { text })!.worker).toBe(holder);
  });

  it("sends elsewhere once the holder is over the cap, however much it holds", () => {
    const policy = prefixCost({ prefixCostQueueWeight: 0, cacheLoadBound: 2 });
    const holder = holderWith(12);
    const cold = [fakeWorker("a", 0), fakeWorker("b", 1), fakeWorker("c", 1)];
    // Mean 3.5: cap 8.
    const chosen = selectWith(policy, [holder, ...cold], { text })!.worker;
    expect(chosen).not.toBe(holder);
  });

  it("does not cap a policy that weighs the queue, nor one built with no bound", () => {
    const holder = holderWith(12);
    const cold = [fakeWorker("a", 0), fakeWorker("b", 1), fakeWorker("c", 1)];
    const weighing = prefixCost({ prefixCostQueueWeight: 0.5, prefixCostRequestChars: 0 });
    expect(selectWith(weighing, [holder, ...cold], { text })!.worker).toBe(holder);
    const unbounded = prefixCost({
      prefixCostQueueWeight: 0,
      prefixCostRequestChars: 0,
      cacheLoadBound: 0,
    });
    expect(selectWith(unbounded, [holderWith(12), ...cold], { text })!.worker.id).toBe("holder");
  });
});

describe("prefix_cost: what a placement evicts from a full cache", () => {
  // holder: 0 own + 0.5 × queued = 1.5 × length + 50; cold: length own (times 1 + 2 × fill).
  const text = question(1);
  const setup = () => {
    const holder = queued("holder", 3 * text.length + 100);
    const cold = fakeWorker("cold");
    return { holder, cold, matched: [text.length, 0] };
  };

  it("moves a prefix off its holder for a moment's queue when the caches have room", () => {
    const { holder, cold, matched } = setup();
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    const decision = policy.select([holder, cold], { text, matched, fill: [0, 0] })!;
    expect(decision.worker).toBe(cold);
  });

  it("keeps it on its holder when the other cache is full: the copy would evict as much", () => {
    const { holder, cold, matched } = setup();
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    expect(policy.select([holder, cold], { text, matched, fill: [1, 1] })!.worker).toBe(holder);
    // The margin grows with the fill (1 + weight × fill times what the holder holds) ...
    expect(policy.select([holder, cold], { text, matched, fill: [0.2, 0.2] })!.worker).toBe(cold);
    // ... and weight 0 turns it off.
    const off = prefixCost({ prefixCostRequestChars: 0, prefixCostEvictionWeight: 0 });
    expect(off.select([holder, cold], { text, matched, fill: [1, 1] })!.worker).toBe(cold);
  });

  it("still leaves the holder when its queue outgrows the margin", () => {
    const { cold, matched } = setup();
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    // weight 2, full: the holder keeps it while 0.5 × queued < 3 × length.
    const swamped = queued("holder", 6 * text.length + 100);
    expect(policy.select([swamped, cold], { text, matched, fill: [1, 1] })!.worker).toBe(cold);
  });

  it("shows the same cost to /debug/route as it decides on", () => {
    const { holder } = setup();
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    expect(policy.cost!(holder, 0, 1000, 0, 1)).toBe(3000 + 0.5 * holder.pendingPrefillChars!);
    expect(policy.cost!(holder, 0, 1000, 0)).toBe(1000 + 0.5 * holder.pendingPrefillChars!);
  });

  it("never draws a text nobody holds to the emptiest cache: without a holder only load counts", () => {
    const policy = prefixCost({ prefixCostRequestChars: 0 });
    const busyEmpty = queued("empty", 100);
    const idleFull = fakeWorker("full");
    // A chat template's first characters, held by chance, make no holder.
    const decision = policy.select([busyEmpty, idleFull], {
      text,
      matched: [20, 20],
      fill: [0, 1],
    })!;
    expect(decision.worker).toBe(idleFull);
    // With a prefix held, a cache with room is rightly cheaper: it evicts less.
    const held = policy.select([busyEmpty, idleFull], {
      text,
      matched: [500, 500],
      fill: [0, 1],
    })!;
    expect(held.worker).toBe(busyEmpty);
  });
});

describe("prefix_cost: a LoRA adapter's load", () => {
  const lora = (id: string, resident: boolean | undefined, inFlight = 0) =>
    Object.assign(fakeWorker(id, inFlight), {
      loraResident: (adapter: string) => (adapter === "sql-lora" ? resident : undefined),
    });

  it("counts --prefix-cost-lora-load-chars where the engine holds the adapter unloaded", () => {
    const policy = prefixCost({ prefixCostRequestChars: 256, prefixCostLoraLoadChars: 4096 });
    const unloaded = lora("unloaded", false);
    const resident = lora("resident", true, 3);
    // resident: 3 × 256 in flight < unloaded: a 4096-character load.
    const pick = policy.select([unloaded, resident], { text: "q", requested: "sql-lora" })!;
    expect(pick.worker).toBe(resident);
    // A base-model request (residency unknown) and a cost of 0 ignore it: the least loaded wins.
    const base = lora("base", undefined, 3);
    expect(policy.select([unloaded, base], { text: "q", requested: "llama" })!.worker).toBe(
      unloaded,
    );
    const blind = prefixCost({ prefixCostRequestChars: 256, prefixCostLoraLoadChars: 0 });
    expect(blind.select([unloaded, resident], { text: "q", requested: "sql-lora" })!.worker).toBe(
      unloaded,
    );
  });

  it("gives way when the queue where it is loaded outweighs a load", () => {
    const policy = prefixCost({ prefixCostRequestChars: 256, prefixCostLoraLoadChars: 512 });
    const pick = policy.select([lora("unloaded", false), lora("resident", true, 3)], {
      text: "q",
      requested: "sql-lora",
    })!;
    expect(pick.worker.id).toBe("unloaded");
  });
});

describe("prefix_cost: a new prefix goes where the caches churn least (--prefix-cost-churn-half-life)", () => {
  const PREAMBLE = "Tools: search(query), fetch(url), calendar(date). Answer briefly. ".repeat(30);
  const tenant = (t: number) =>
    `${PREAMBLE}Tenant ${t} ${"policy text of this tenant ".repeat(40)}${t}\nUser: hello`;
  const churned = (halfLife = SUGGESTED_CHURN_HALF_LIFE) =>
    prefixCost({ prefixCostChurnHalfLife: halfLife });

  /** Four workers holding the preamble, with these characters of prefill queued on each. */
  function preambleFleet(queuedChars: readonly number[]): FakeWorker[] {
    return queuedChars.map((chars, i) => {
      const w = queued(`w${i}`, chars);
      w.tree.insert(PREAMBLE);
      return w;
    });
  }

  /**
   * Routes tenants 0..count-1 one after another (each a new prefix), with the queues of every
   * decision drawn from `seed`: up to a few hundred characters each, the load of one instant.
   * Returns each tenant's worker.
   */
  function placeTenants(policy: PrefixCostPolicy, count: number, seed: number): string[] {
    const random = seededRandom(seed);
    const workers = preambleFleet([0, 0, 0, 0]);
    const homes: string[] = [];
    for (let t = 0; t < count; t++) {
      for (const w of workers)
        Object.assign(w, { pendingPrefillChars: Math.floor(random() * 600) });
      homes.push(selectWith(policy, workers, { text: tenant(t) })!.worker.id);
    }
    return homes;
  }

  it("places new tenants alike whatever the load of each instant, and spreads them", () => {
    const maps = [1, 2, 3, 4, 5].map((seed) => placeTenants(churned(), 12, seed));
    expect(new Set(maps.map((m) => m.join())).size).toBe(1);
    expect(new Set(maps[0]!).size).toBe(4);
    // At the lowest cost instead, each instant's queues decide where a tenant lives.
    const lowest = [1, 2, 3, 4, 5].map((seed) => placeTenants(churned(0), 12, seed).join());
    expect(new Set(lowest).size).toBeGreaterThan(1);
  });

  it("sends a new tenant to the worker its peers sent the least uncached work to", () => {
    const policy = churned();
    const workers = preambleFleet([0, 0, 0, 0]);
    // Tenants on w0, w1 and w3 (forced: one candidate), then a new tenant among all four.
    for (const i of [0, 1, 3]) selectWith(policy, [workers[i]!], { text: tenant(10 + i) });
    // w2 has a little more queued at this instant (under one request's worth): still w2.
    Object.assign(workers[2]!, { pendingPrefillChars: 400 });
    expect(selectWith(policy, workers, { text: tenant(1) })!.worker.id).toBe("w2");
  });

  it("still leaves the least-churned worker when its queue outweighs the tenant's own prefill", () => {
    const policy = churned();
    const workers = preambleFleet([0, 0, 0, 0]);
    for (const i of [0, 1, 3]) selectWith(policy, [workers[i]!], { text: tenant(10 + i) });
    const own = tenant(1).length - PREAMBLE.length;
    Object.assign(workers[2]!, { pendingPrefillChars: 2 * (own + 256) + 2 });
    expect(selectWith(policy, workers, { text: tenant(1) })!.worker.id).not.toBe("w2");
  });

  it("leaves a tenant's later requests to the cost: its holder keeps it", () => {
    const policy = churned();
    const workers = preambleFleet([0, 0, 0, 0]);
    const home = selectWith(policy, workers, { text: tenant(1) })!.worker;
    // Its holder has now churned most; the next turn of the same tenant still goes there.
    expect(selectWith(policy, workers, { text: `${tenant(1)} and more` })!.worker).toBe(home);
  });

  it("forgets a worker's churn by half every half-life decisions", () => {
    const churn = new Churn(4);
    const [a, b] = fleet(2) as [FakeWorker, FakeWorker];
    churn.add(a, 1000);
    expect(churn.of(a)).toBe(1000);
    for (let i = 0; i < 4; i++) churn.add(b, 0);
    expect(churn.of(a)).toBeCloseTo(500, 9);
    expect(churn.of(b)).toBe(0);
    // Off unless configured: the replay did not show it narrower in every cell (docs/benchmarks.md).
    expect(DEFAULT_CHURN_HALF_LIFE).toBe(0);
    expect(() => createPolicy("prefix_cost", { prefixCostChurnHalfLife: -1 })).toThrow(
      /prefixCostChurnHalfLife/,
    );
  });
});
