import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { PrefixClaims } from "../../src/index/prefix-claims.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { DecisionTrace } from "../../src/scheduling/decision-trace.js";
import { newPrefixClaimValue } from "../../src/scheduling/new-prefix-claim.js";
import { Scheduler } from "../../src/scheduling/scheduler.js";
import { SessionTable } from "../../src/scheduling/session-table.js";

const SYSTEM = "You are a helpful assistant. Answer briefly and cite your sources. ";

function setup(policy: "cache_aware" | "round_robin" = "cache_aware") {
  const index = new ApproximateIndex();
  const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0 }));
  for (const w of workers) index.addWorker(w.id);
  return { index, workers, decider: new Scheduler(createPolicy(policy), index) };
}

describe("Scheduler", () => {
  it("hands the index's matched lengths to the policy and inserts the text for the chosen worker", () => {
    const { index, workers, decider } = setup();
    index.insert("b", undefined, `${SYSTEM}first question`);
    const decision = decider.decide(workers, { text: `${SYSTEM}second question` })!;
    expect(decision.worker.id).toBe("b");
    expect(decision.branch).toBe("cache_hit");
    expect(decision.index).toBe("approx");
    expect(decision.heldBefore).toBe(SYSTEM.length);
    expect(index.treeOf("b")!.match(`${SYSTEM}second question`)).toBe(
      `${SYSTEM}second question`.length,
    );
  });

  it("hands each candidate's cache fill from the index to the policy, and explains it", () => {
    const { index, workers } = setup();
    index.setBudget("a", 4 * SYSTEM.length);
    index.insert("a", undefined, SYSTEM);
    const seen: (readonly number[] | undefined)[] = [];
    const policy = createPolicy("prefix_cost");
    const spy: typeof policy = {
      ...policy,
      name: policy.name,
      usesPrefixes: true,
      select: (candidates, request) => {
        seen.push(request.fill?.slice());
        return policy.select(candidates, request);
      },
    };
    const decider = new Scheduler(spy, index);
    decider.decide(workers, { text: `${SYSTEM}a question` });
    // Only a's budget is the engine's (set): the others' fill is unknown, 0.
    expect(seen[0]).toEqual([0.25, 0, 0]);
    expect(decider.explain(workers, { text: SYSTEM }).fill).toEqual([index.fill("a"), 0, 0]);
  });

  it("does not ask or fill the index for policies that ignore prefixes", () => {
    const { index, workers, decider } = setup("round_robin");
    const decision = decider.decide(workers, { text: SYSTEM })!;
    expect(decision.index).toBeNull();
    for (const w of workers) expect(index.size(w.id)).toBe(0);
  });

  it("rejected() forgets exactly what the decision inserted and keeps what the worker held before", () => {
    const { index, workers, decider } = setup();
    index.insert("a", undefined, `${SYSTEM}kept question`);
    const before = index.size("a");
    const request = { text: `${SYSTEM}a 60 MB request the worker refused` };
    const decision = decider.decide(workers, request)!;
    expect(decision.worker.id).toBe("a");
    expect(index.size("a")).toBeGreaterThan(before);
    decider.rejected(decision, request);
    expect(index.size("a")).toBe(before);
    expect(index.treeOf("a")!.match(`${SYSTEM}kept question`)).toBe(
      `${SYSTEM}kept question`.length,
    );
    expect(index.treeOf("a")!.match(request.text)).toBe(SYSTEM.length);
  });

  it("a cold request that is rejected leaves the worker's tree as empty as it was", () => {
    const { index, workers, decider } = setup();
    const request = { text: "x".repeat(10_000) };
    const decision = decider.decide(workers, request)!;
    decider.rejected(decision, request);
    expect(index.size(decision.worker.id)).toBe(0);
    expect(index.treeOf(decision.worker.id)!.recount().chars).toBe(0);
  });

  it("reported() forgets what extended the evicted part of the path and keeps the text just computed", () => {
    const { index, workers, decider } = setup();
    index.insert("a", undefined, `${SYSTEM}older branch one`);
    index.insert("a", undefined, `${SYSTEM}older branch two`);
    const request = { text: `${SYSTEM}new question` };
    const decision = decider.decide(workers, request)!;
    expect(decision.worker.id).toBe("a");
    expect(decision.heldBefore).toBe(SYSTEM.length);
    // The engine held only the first 10 characters: everything below them is gone there.
    const forgotten = decider.reported(decision, request, 10);
    // The two branches shared "older branch ": 16 + 3 characters.
    expect(forgotten).toBe("older branch one".length + "two".length);
    const tree = index.treeOf("a")!;
    expect(tree.match(request.text)).toBe(request.text.length);
    expect(tree.match(`${SYSTEM}older branch one`)).toBe(SYSTEM.length);
    expect(index.size("a")).toBe(request.text.length);
  });

  it("reported() changes nothing when the engine held what the index claimed", () => {
    const { index, workers, decider } = setup();
    index.insert("a", undefined, `${SYSTEM}older`);
    const request = { text: `${SYSTEM}new` };
    const decision = decider.decide(workers, request)!;
    const size = index.size("a");
    expect(decider.reported(decision, request, SYSTEM.length)).toBe(0);
    expect(index.size("a")).toBe(size);
  });
});

describe("Scheduler.prepare", () => {
  /** The approximate trees plus an asynchronous step that records what it was asked. */
  class PreparingIndex extends ApproximateIndex {
    asked: string[][] = [];
    prepare(_request: unknown, workers: readonly { id: string }[]) {
      this.asked.push(workers.map((w) => w.id));
      return Promise.resolve();
    }
    sourceOf() {
      return "precise";
    }
  }

  it("lists candidates and calls the index's step only for a request with tokenizer input", async () => {
    const index = new PreparingIndex();
    const decider = new Scheduler(createPolicy("cache_aware"), index);
    let listed = 0;
    const candidates = () => {
      listed++;
      return [{ id: "a", inFlight: 0 }];
    };
    expect(decider.prepare(candidates, { text: SYSTEM })).toBeUndefined();
    expect(listed).toBe(0);
    await decider.prepare(candidates, { text: SYSTEM, tokenizeInput: { prompt: SYSTEM } });
    expect(index.asked).toEqual([["a"]]);
    index.addWorker("a");
    expect(decider.decide(candidates(), { text: SYSTEM })!.index).toBe("precise");
  });

  it("adds nothing to await for an index without the step", () => {
    const { decider } = setup();
    const request = { text: SYSTEM, tokenizeInput: { prompt: SYSTEM } };
    expect(decider.prepare(() => [], request)).toBeUndefined();
  });
});

/** Claims held in memory, as the Redis claims keep them: the first proposal for a key stays. */
class MemoryClaims implements PrefixClaims {
  readonly held = new Map<string, string>();
  calls = 0;
  claim(key: string, value: string): Promise<string | undefined> {
    this.calls += 1;
    if (!this.held.has(key)) this.held.set(key, value);
    return Promise.resolve(this.held.get(key));
  }
}

describe("Scheduler.decideAgreed (replicas agreeing on a new prefix)", () => {
  const text = (question: string) =>
    `${"tenant prompt, long enough to claim. ".repeat(20)}${question}`;
  const agreed = (claims: PrefixClaims, inFlight: number[] = [0, 0, 0]) => {
    const index = new ApproximateIndex();
    const workers = ["a", "b", "c"].map((id, i) => ({ id, inFlight: inFlight[i] ?? 0 }));
    for (const w of workers) index.addWorker(w.id);
    return {
      index,
      workers,
      decider: new Scheduler(createPolicy("cache_aware"), index, undefined, claims),
    };
  };

  it("follows the worker another replica claimed first for the same new prefix", async () => {
    const claims = new MemoryClaims();
    const first = agreed(claims);
    const second = agreed(claims);
    // A second replica whose load rotation is elsewhere would pick another worker on its own.
    second.decider.decide(second.workers, { text: "warm-up" });
    const a = await first.decider.decideAgreed(first.workers, { text: text("one?") });
    const b = await second.decider.decideAgreed(second.workers, { text: text("two?") });
    expect(b!.worker.id).toBe(a!.worker.id);
    expect(b!.branch).toBe("peer_claim");
    expect(b!.heldBefore).toBe(0);
    expect(second.index.treeOf(a!.worker.id)!.match(text("two?"))).toBe(text("two?").length);
  });

  it("weighs the claimer's worker only for what the two texts share: a claim on a short common start does not pull a long different prompt", async () => {
    const claims = new MemoryClaims();
    const first = agreed(claims);
    const second = agreed(claims);
    second.decider.decide(second.workers, { text: "warm-up" });
    const start = "Common opening of two unrelated prompts. ".repeat(8);
    const a = await first.decider.decideAgreed(first.workers, {
      text: `${start}${"first tenant's own long instructions. ".repeat(50)}`,
    });
    const b = await second.decider.decideAgreed(second.workers, {
      text: `${start}${"second tenant, other instructions entirely. ".repeat(50)}`,
    });
    expect(claims.held.size).toBe(1);
    expect(b!.worker.id).not.toBe(a!.worker.id);
    expect(b!.branch).toBe("cache_miss");
  });

  it("asks nothing and answers at once when the index already singles out a worker", () => {
    const claims = new MemoryClaims();
    const { index, workers, decider } = agreed(claims);
    index.insert("b", undefined, text("earlier?"));
    const decision = decider.decideAgreed(workers, { text: text("later?") });
    expect(decision).not.toBeInstanceOf(Promise);
    expect((decision as { worker: { id: string } }).worker.id).toBe("b");
    expect(claims.calls).toBe(0);
  });

  it("keeps its own choice when the claimed worker is not one of its candidates", async () => {
    const gone: PrefixClaims = {
      claim: () =>
        Promise.resolve(newPrefixClaimValue("a-worker-this-replica-lacks", 0, text("q?"))),
    };
    const { workers, decider } = agreed(gone);
    const decision = await decider.decideAgreed(workers, { text: text("q?") });
    expect(decision!.branch).toBe("cache_miss");
  });

  it("lets the policy's load bound overrule a claim on a worker that is far busier than the rest", async () => {
    const claims: PrefixClaims = {
      claim: () => Promise.resolve(newPrefixClaimValue("a", 0, text("q?"))),
    };
    const { workers, decider } = agreed(claims, [40, 0, 0]);
    const decision = await decider.decideAgreed(workers, { text: text("q?") });
    expect(decision!.worker.id).not.toBe("a");
    expect(decision!.branch).toBe("load_bound");
  });

  it("traces the fill each candidate had when it decided, not a later decision's, after a claim's wait", async () => {
    let answer: (value: string | undefined) => void = () => {};
    const claims: PrefixClaims = {
      claim: () => new Promise((resolve) => (answer = resolve)),
    };
    const { index, workers, decider } = agreed(claims);
    index.setBudget("a", 4 * SYSTEM.length);
    index.insert("a", undefined, SYSTEM);
    const lines: string[] = [];
    decider.trace = new DecisionTrace({ write: (l) => lines.push(l) > 0 }, 1e6, () => 0);
    const waiting = decider.decideAgreed(workers, { text: text("q?") });
    expect(waiting).toBeInstanceOf(Promise);
    // Another decision, over the candidates in another order, while the claim is out.
    decider.decide([workers[2]!, workers[1]!, workers[0]!], { text: "another request" });
    answer(undefined);
    await waiting;
    const first = lines
      .map((l) => JSON.parse(l) as { len: number; c: [string, number, number][] })
      .find((l) => l.len === text("q?").length)!;
    expect(first.c.map(([id, , fill]) => [id, fill])).toEqual([
      ["a", 0.25],
      ["b", 0],
      ["c", 0],
    ]);
  });

  it("a follower weighs the prefill the claimer queued on its worker: a new tenant that shares only the tool preamble goes elsewhere, as one router sends it", async () => {
    const tools = "Tools every tenant shares: search, calendar, mail, tickets. ".repeat(34);
    const tenantOf = (name: string) =>
      `${tools}You serve tenant ${name}. ${`Policies of ${name}, to the letter. `.repeat(60)}`;
    const replica = (claims: PrefixClaims) => {
      const index = new ApproximateIndex();
      const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0, pendingPrefillChars: 0 }));
      for (const w of workers) index.addWorker(w.id);
      return {
        workers,
        decider: new Scheduler(createPolicy("prefix_cost"), index, undefined, claims),
      };
    };
    const claims = new MemoryClaims();
    const first = replica(claims);
    const second = replica(claims);
    const a = await first.decider.decideAgreed(first.workers, { text: tenantOf("acme") });
    // One router: the first tenant's prefill queued where it went, then the second tenant.
    const alone = replica(new MemoryClaims());
    alone.decider.decide(alone.workers, { text: tenantOf("acme") });
    alone.workers[0]!.inFlight = 1;
    alone.workers[0]!.pendingPrefillChars = tenantOf("acme").length;
    const one = alone.decider.decide(alone.workers, { text: tenantOf("globex") })!;
    expect(one.worker.id).not.toBe("a");
    // The second replica has not heard of the first's decision: only the claim tells it.
    const b = await second.decider.decideAgreed(second.workers, { text: tenantOf("globex") });
    expect(claims.held.size).toBe(1);
    expect(b!.worker.id).not.toBe(a!.worker.id);
    expect(b!.branch).not.toBe("peer_claim");
    // A claim that queued nothing (an older replica's) is followed for the preamble it holds.
    const older = replica({
      claim: () =>
        Promise.resolve(newPrefixClaimValue("a", 0, tenantOf("acme")).replace("|0|", "|")),
    });
    older.decider.decide(older.workers, { text: "warm-up" });
    const c = await older.decider.decideAgreed(older.workers, { text: tenantOf("globex") });
    expect(c!.worker.id).toBe("a");
    expect(c!.branch).toBe("peer_claim");
  });

  it("a replica's requests on a prefix it is claiming decide one after another, each on the last one's insert and load", async () => {
    let answer: (value: string | undefined) => void = () => {};
    const claims = { calls: 0 } as { calls: number } & PrefixClaims;
    claims.claim = () => {
      claims.calls += 1;
      return new Promise((resolve) => (answer = resolve));
    };
    const { index, workers, decider } = agreed(claims);
    const x = decider.decideAgreed(workers, { text: text("one?") });
    const y = decider.decideAgreed(workers, { text: text("two?") });
    expect(x).toBeInstanceOf(Promise);
    expect(y).toBeInstanceOf(Promise);
    expect(claims.calls).toBe(1);
    const first = await (async () => {
      answer(undefined);
      const d = (await x)!;
      // The forward stage takes the worker's load in the turn its decision arrives.
      (d.worker as { inFlight: number }).inFlight += 1;
      return d;
    })();
    const second = (await y)!;
    // Decided after the first was recorded: it holds the shared prompt there, and says so.
    expect(second.worker.id).toBe(first.worker.id);
    expect(second.branch).toBe("cache_hit");
    expect(second.heldBefore).toBeGreaterThan(text("").length - 10);
    expect(index.size(first.worker.id)).toBeGreaterThan(text("one?").length);
  });

  it("keeps its own choice when the claim gets no answer in time", async () => {
    const claims: PrefixClaims = { claim: () => Promise.resolve(undefined) };
    const { index, workers, decider } = agreed(claims);
    const decision = await decider.decideAgreed(workers, { text: text("q?") });
    expect(decision!.branch).toBe("cache_miss");
    expect(index.size(decision!.worker.id)).toBe(text("q?").length);
  });
});

describe("Scheduler: the cache account's facts (issue 26)", () => {
  it("names the best holder's match, the runner-up and why the chosen worker held less (session)", () => {
    const index = new ApproximateIndex();
    const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0 }));
    for (const w of workers) index.addWorker(w.id);
    const sessions = new SessionTable(16);
    const decider = new Scheduler(createPolicy("cache_aware"), index, sessions);
    index.insert("b", undefined, `${SYSTEM}first question`);
    sessions.bind("chat-1", "c");
    const decision = decider.decide(workers, {
      text: `${SYSTEM}second question`,
      session: "chat-1",
    })!;
    expect(decision.worker.id).toBe("c");
    expect(decision.heldBefore).toBe(0);
    expect(decision.available).toBe(SYSTEM.length);
    expect(decision.runnerUp?.id).toBe("b");
    expect(decision.runnerUpHeld).toBe(SYSTEM.length);
    expect(decision.lossReason).toBe("session");
  });

  it("names load when cache_aware's balance gate sends a held prefix to the least loaded", () => {
    const { index, workers, decider } = setup();
    index.insert("a", undefined, `${SYSTEM}first question`);
    const busy = workers.map((w) => (w.id === "a" ? { ...w, inFlight: 200 } : w));
    const decision = decider.decide(busy, { text: `${SYSTEM}second question` })!;
    expect(decision.branch).toBe("imbalanced");
    expect(decision.worker.id).not.toBe("a");
    expect(decision.available).toBe(SYSTEM.length);
    expect(decision.lossReason).toBe("load");
  });

  it("has no runner-up and no loss when the best holder is chosen alone", () => {
    const { index, workers, decider } = setup();
    index.insert("a", undefined, SYSTEM);
    const decision = decider.decide([workers[0]!], { text: SYSTEM })!;
    expect(decision.runnerUp).toBeUndefined();
    expect(decision.runnerUpHeld).toBe(0);
    expect(decision.available).toBe(SYSTEM.length);
    expect(decision.lossReason).toBeNull();
  });
});

describe("Scheduler: the router's record of LoRA adapters", () => {
  it("tells the chosen worker which adapter it was sent (its engine loads it)", () => {
    const index = new ApproximateIndex();
    const routed: string[] = [];
    const workers = [{ id: "a", inFlight: 0, loraRouted: (name: string) => routed.push(name) }];
    index.addWorker("a");
    const decider = new Scheduler(createPolicy("round_robin"), index);
    decider.decide(workers, { text: "t", requested: "sql-lora" });
    decider.decide(workers, { text: "t", requested: "base", adapter: "chat-lora" });
    decider.decide(workers, { text: "t" });
    expect(routed).toEqual(["sql-lora", "chat-lora"]);
  });
});

describe("Scheduler: a replica holds a decision that places a prefix by its rank (--state-rank-hold-ms)", () => {
  const tenant = (name: string) =>
    `${"Tools every tenant shares: search, mail. ".repeat(8)}Tenant ${name}. ${`Rules of ${name}. `.repeat(40)}`;
  const replica = (rank: number, holdMs: number) => {
    const index = new ApproximateIndex();
    const workers = ["a", "b", "c"].map((id) => ({ id, inFlight: 0, pendingPrefillChars: 0 }));
    for (const w of workers) index.addWorker(w.id);
    const decider = new Scheduler(createPolicy("prefix_cost"), index);
    decider.replicaRank = () => rank;
    decider.rankHoldMs = holdMs;
    const waits: number[] = [];
    let release: () => void = () => {};
    decider.wait = (ms) => {
      waits.push(ms);
      return new Promise((resolve) => (release = resolve));
    };
    return { index, workers, decider, waits, release: () => release() };
  };

  it("rank r holds a new prefix r × the hold, then decides on the view as it is then: a peer's decision of that instant, arrived meanwhile, is weighed as one router weighs its previous one", async () => {
    const r = replica(1, 2);
    const pending = r.decider.decideAgreed(r.workers, { text: tenant("acme") });
    expect(pending).toBeInstanceOf(Promise);
    expect(r.waits).toEqual([2]);
    // Without the hold this replica would take the worker its rotation names at once.
    const alone = replica(1, 0);
    const first = alone.decider.decideAgreed(alone.workers, { text: tenant("acme") });
    expect(first).not.toBeInstanceOf(Promise);
    const unheld = (first as { worker: { id: string } }).worker.id;
    // Meanwhile rank 0's decision of the same instant (another tenant) reached it: its insert
    // and the prefill it queued there.
    r.index.insert(unheld, undefined, tenant("globex"));
    const there = r.workers.find((w) => w.id === unheld)!;
    there.inFlight = 1;
    there.pendingPrefillChars = tenant("globex").length;
    r.release();
    const decision = (await pending)!;
    expect(decision.worker.id).not.toBe(unheld);
    expect(r.index.treeOf(decision.worker.id)!.match(tenant("acme"))).toBe(tenant("acme").length);
  });

  it("never holds on rank 0, with the hold off, or for a request that stays on the worker holding its prefix", () => {
    for (const [rank, hold] of [
      [0, 2],
      [3, 0],
    ] as const) {
      const r = replica(rank, hold);
      expect(r.decider.decideAgreed(r.workers, { text: tenant("acme") })).not.toBeInstanceOf(
        Promise,
      );
      expect(r.waits).toEqual([]);
    }
    const r = replica(2, 2);
    r.index.insert("b", undefined, `${tenant("acme")} first question?`);
    const stays = r.decider.decideAgreed(r.workers, { text: `${tenant("acme")} second?` });
    expect(stays).not.toBeInstanceOf(Promise);
    expect((stays as { worker: { id: string } }).worker.id).toBe("b");
    expect(r.waits).toEqual([]);
  });

  it("holds a move off the holder, and at most 8 ranks' worth", () => {
    const r = replica(20, 2);
    r.index.insert("b", undefined, tenant("acme"));
    const busy = r.workers.find((w) => w.id === "b")!;
    busy.inFlight = 50;
    busy.pendingPrefillChars = 200_000;
    expect(r.decider.decideAgreed(r.workers, { text: `${tenant("acme")} q?` })).toBeInstanceOf(
      Promise,
    );
    expect(r.waits).toEqual([16]);
  });
});
