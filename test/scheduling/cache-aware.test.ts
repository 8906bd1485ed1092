import { describe, expect, it } from "vitest";
import { CacheAwarePolicy } from "../../src/scheduling/builtin-profiles.js";
import type { CacheAwareOptions } from "../../src/scheduling/cache-aware.js";
import { POLICY_DEFAULTS } from "../../src/scheduling/options.js";
import { coldText, type FakeWorker, fakeWorker, fleet, selectWith } from "./fake-worker.js";

function cacheAware(overrides: Partial<CacheAwareOptions> = {}): CacheAwarePolicy {
  return new CacheAwarePolicy({ ...POLICY_DEFAULTS, ...overrides });
}

const PROMPT = "You are a helpful assistant. Answer briefly and cite your sources. ";

/** Plays the router at concurrency 1: in-flight up while the request runs, down when it ends. */
function route(policy: CacheAwarePolicy, workers: FakeWorker[], text: string): FakeWorker {
  const decision = selectWith(policy, workers, { text })!;
  decision.worker.inFlight++;
  decision.worker.inFlight--;
  return decision.worker;
}

describe("cache_aware imbalance gate", () => {
  // The heavier worker holds the prompt, so "balanced" shows as a cache_hit on it and
  // "imbalanced" as a move to the lighter one.
  function gate(light: number, heavy: number) {
    const policy = cacheAware();
    const a = fakeWorker("light", light);
    const b = fakeWorker("heavy", heavy);
    b.tree.insert(PROMPT);
    return selectWith(policy, [a, b], { text: PROMPT })!;
  }

  it("is imbalanced when both the absolute and the relative conditions hold", () => {
    const decision = gate(10, 100); // 90 > 64 and 100 > 15
    expect(decision.branch).toBe("imbalanced");
    expect(decision.worker.id).toBe("light");
  });

  it("is not imbalanced on the absolute condition alone", () => {
    const decision = gate(1000, 1100); // 100 > 64, but 1100 <= 1500
    expect(decision.branch).toBe("cache_hit");
    expect(decision.worker.id).toBe("heavy");
  });

  it("is not imbalanced on the relative condition alone", () => {
    const decision = gate(10, 40); // 40 > 15, but 30 <= 64
    expect(decision.branch).toBe("cache_hit");
    expect(decision.worker.id).toBe("heavy");
  });

  it("uses strict comparisons: a difference of exactly abs, or a ratio of exactly rel, is balanced", () => {
    expect(gate(0, 64).branch).toBe("cache_hit"); // 64 > 64 is false
    expect(gate(200, 300).branch).toBe("cache_hit"); // 300 > 200 * 1.5 is false
    expect(gate(0, 65).branch).toBe("imbalanced");
  });

  it("honours configured thresholds", () => {
    const policy = cacheAware({ balanceAbsThreshold: 2, balanceRelThreshold: 1 });
    const [a, b] = fleet(2, [1, 4]) as [FakeWorker, FakeWorker];
    b.tree.insert(PROMPT);
    expect(selectWith(policy, [a, b], { text: PROMPT })).toMatchObject({
      worker: a,
      branch: "imbalanced",
    });
  });

  it("sends an imbalanced fleet to the least-loaded worker, reporting that worker's match rate", () => {
    const policy = cacheAware();
    const workers = fleet(4, [120, 7, 90, 300]);
    workers[3]!.tree.insert(PROMPT); // full match, but the heaviest
    workers[1]!.tree.insert(PROMPT.slice(0, 10)); // partial match on the least loaded
    const decision = selectWith(policy, workers, { text: PROMPT })!;
    expect(decision.worker).toBe(workers[1]);
    expect(decision.branch).toBe("imbalanced");
    expect(decision.matchRate).toBeCloseTo(10 / PROMPT.length, 12);
  });

  it("breaks load ties in rotation when imbalanced", () => {
    const policy = cacheAware();
    const workers = fleet(4, [0, 500, 0, 500]);
    const chosen = [0, 1, 2, 3].map((i) => selectWith(policy, workers, { text: coldText(i) })!);
    expect(chosen.every((d) => d.branch === "imbalanced")).toBe(true);
    expect(new Set(chosen.map((d) => d.worker.id))).toEqual(new Set(["w0", "w2"]));
  });
});

describe("cache_aware prefix matching", () => {
  it("sends a best match above the threshold to that worker, as a cache_hit with its match rate", () => {
    const policy = cacheAware();
    // Worker 1 is the busiest, but within the load bound (2 x mean 2.33 + 1).
    const workers = fleet(3, [2, 3, 2]);
    workers[1]!.tree.insert(`${PROMPT}What is the capital of France?`);
    const text = `${PROMPT}What is 2 + 2?`;
    const decision = selectWith(policy, workers, { text })!;
    expect(decision.worker).toBe(workers[1]);
    expect(decision.branch).toBe("cache_hit");
    expect(decision.matchRate).toBe(`${PROMPT}What is `.length / text.length);
  });

  it("does not count a match rate exactly at the threshold as a hit (strictly above)", () => {
    const workers = fleet(2, [0, 5]);
    workers[1]!.tree.insert("abcXXXXXXX");
    // 3 of 10 characters match: 0.3 is not > 0.3.
    const atThreshold = selectWith(cacheAware(), workers, { text: "abcYYYYYYY" })!;
    expect(atThreshold.branch).toBe("cache_miss");
    expect(atThreshold.worker).toBe(workers[0]);
    expect(atThreshold.matchRate).toBe(0);
    // 4 of 10: a hit.
    workers[1]!.tree.insert("abcdXXXXXX");
    const above = selectWith(cacheAware(), workers, { text: "abcdYYYYYY" })!;
    expect(above.branch).toBe("cache_hit");
    expect(above.worker).toBe(workers[1]);
    expect(above.matchRate).toBe(0.4);
  });

  it("picks the least loaded among workers with an equal best match", () => {
    const policy = cacheAware();
    const workers = fleet(4, [3, 1, 0, 2]);
    for (const i of [0, 1, 3]) workers[i]!.tree.insert(PROMPT);
    const decision = selectWith(policy, workers, { text: PROMPT })!;
    expect(decision.worker).toBe(workers[1]);
    expect(decision.branch).toBe("cache_hit");
    expect(decision.matchRate).toBe(1);
  });

  it("rotates among equally loaded workers with an equal best match", () => {
    const policy = cacheAware();
    const workers = fleet(3, [1, 1, 0]);
    workers[0]!.tree.insert(PROMPT);
    workers[1]!.tree.insert(PROMPT);
    const ids = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const decision = selectWith(policy, workers, { text: PROMPT })!;
      expect(decision.branch).toBe("cache_hit");
      ids.add(decision.worker.id);
    }
    expect(ids).toEqual(new Set(["w0", "w1"]));
  });

  it("prefers a longer match over a lighter load when the fleet is balanced", () => {
    const policy = cacheAware();
    const workers = fleet(2, [0, 20]);
    workers[0]!.tree.insert(PROMPT.slice(0, 40));
    workers[1]!.tree.insert(PROMPT);
    expect(selectWith(policy, workers, { text: PROMPT })!.worker).toBe(workers[1]);
  });

  it("sends a best match below the threshold to the least-loaded worker as a cache_miss", () => {
    const policy = cacheAware();
    const workers = fleet(3, [4, 2, 9]);
    workers[2]!.tree.insert("abXXXXXXXX");
    workers[1]!.tree.insert("aXXXXXXXXX");
    const decision = selectWith(policy, workers, { text: "abYYYYYYYY" })!;
    expect(decision.worker).toBe(workers[1]);
    expect(decision.branch).toBe("cache_miss");
    expect(decision.matchRate).toBe(0.1); // the chosen worker's own rate, not the best one
  });

  it("treats empty text as a miss with match rate 0 and inserts nothing", () => {
    const policy = cacheAware({ cacheThreshold: 0 });
    const workers = fleet(2, [1, 0]);
    workers[0]!.tree.insert(PROMPT);
    const before = workers[0]!.tree.charCount;
    const decision = selectWith(policy, workers, { text: "" })!;
    expect(decision).toMatchObject({ worker: workers[1], branch: "cache_miss", matchRate: 0 });
    expect(workers[0]!.tree.charCount).toBe(before);
    expect(workers[1]!.tree.charCount).toBe(0);
    const imbalanced = selectWith(policy, fleet(2, [0, 100]), { text: "" })!;
    expect(imbalanced).toMatchObject({ branch: "imbalanced", matchRate: 0 });
  });
});

describe("cache_aware spreading and stickiness", () => {
  // Regression: the SGLang router took the first least-loaded worker, so at concurrency 1 (every
  // load 0 at selection time) all cold traffic went to worker 0.
  it("spreads cold traffic at concurrency 1 over all 4 workers, round-robin-like", () => {
    const policy = cacheAware();
    const workers = fleet(4);
    const counts = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const worker = route(policy, workers, coldText(i));
      counts.set(worker.id, (counts.get(worker.id) ?? 0) + 1);
    }
    expect(Object.fromEntries(counts)).toEqual({ w0: 10, w1: 10, w2: 10, w3: 10 });
  });

  it("routes the same long prefix to the same worker again and again", () => {
    const policy = cacheAware();
    const workers = fleet(4);
    const first = route(policy, workers, `${PROMPT}question 0`);
    for (let i = 1; i < 30; i++) {
      expect(route(policy, workers, `${PROMPT}question ${i}`)).toBe(first);
    }
  });

  it("spreads different prefix families over different workers, each family sticking to one", () => {
    const policy = cacheAware();
    const workers = fleet(4);
    const families = [
      "Alpha system prompt: ",
      "Beta rules of play: ",
      "Gamma code review: ",
      "Delta translate: ",
    ];
    const homes = new Map<string, Set<string>>();
    for (let round = 0; round < 10; round++) {
      for (const family of families) {
        const worker = route(policy, workers, `${family.repeat(4)}request ${round}`);
        const set = homes.get(family) ?? new Set<string>();
        set.add(worker.id);
        homes.set(family, set);
      }
    }
    const home = families.map((f) => [...homes.get(f)!]);
    for (const ids of home) expect(ids).toHaveLength(1);
    expect(new Set(home.map((ids) => ids[0]))).toEqual(new Set(["w0", "w1", "w2", "w3"]));
  });
});

describe("cache_aware tree upkeep", () => {
  function inserted(worker: FakeWorker, text: string): boolean {
    return worker.tree.match(text) === text.length;
  }

  it("inserts the text into the chosen worker's tree on an imbalanced decision", () => {
    const workers = fleet(2, [0, 100]);
    const text = "imbalanced text";
    const decision = selectWith(cacheAware(), workers, { text })!;
    expect(decision.branch).toBe("imbalanced");
    expect(inserted(workers[0]!, text)).toBe(true);
    expect(workers[1]!.tree.match(text)).toBe(0);
  });

  it("inserts the text into the chosen worker's tree on a cache_hit", () => {
    const workers = fleet(2);
    workers[1]!.tree.insert(PROMPT);
    const text = `${PROMPT}and one more thing`;
    const decision = selectWith(cacheAware(), workers, { text })!;
    expect(decision.branch).toBe("cache_hit");
    expect(inserted(workers[1]!, text)).toBe(true);
    expect(workers[0]!.tree.match(text)).toBe(0);
  });

  it("inserts the text into the chosen worker's tree on a cache_miss", () => {
    const workers = fleet(2, [3, 0]);
    const text = "miss text";
    const decision = selectWith(cacheAware(), workers, { text })!;
    expect(decision.branch).toBe("cache_miss");
    expect(decision.worker).toBe(workers[1]);
    expect(inserted(workers[1]!, text)).toBe(true);
    expect(workers[0]!.tree.match(text)).toBe(0);
  });

  it("lets a worker absent from one call keep its tree and win again when it returns", () => {
    const policy = cacheAware();
    const [a, b, c] = fleet(3, [3, 2, 2]) as [FakeWorker, FakeWorker, FakeWorker];
    a.tree.insert(PROMPT);
    // a is briefly unhealthy: not a candidate for a while.
    for (let i = 0; i < 5; i++) {
      expect(selectWith(policy, [b, c], { text: coldText(i) })!.worker).not.toBe(a);
    }
    expect(inserted(a, PROMPT)).toBe(true);
    // Back, and still the only holder of the prompt: it wins despite the heavier load.
    const back = selectWith(policy, [a, b, c], { text: `${PROMPT}after return` })!;
    expect(back).toMatchObject({
      worker: a,
      branch: "cache_hit",
      matchRate: PROMPT.length / `${PROMPT}after return`.length,
    });
  });
});

describe("cache_aware load bound (one hot prefix must not pile onto one worker)", () => {
  const HOT = `${PROMPT}${"Shared instructions for every request. ".repeat(20)}`;
  /** Four workers a, b, c, d with the given in-flight counts. */
  const fleet4 = (loads: number[]) =>
    fleet(4, loads) as [FakeWorker, FakeWorker, FakeWorker, FakeWorker];

  it("sends the best match to the least-loaded worker when it is over the bound, as load_bound", () => {
    const policy = cacheAware();
    // Mean in-flight 5, bound 2 x 5 + 1 = 11: the holder at 17 is over it.
    const [a, b, c, d] = fleet4([17, 1, 0, 2]);
    a.tree.insert(HOT);
    const text = `${HOT}question`;
    const decision = selectWith(policy, [a, b, c, d], { text })!;
    expect(decision.worker).toBe(c);
    expect(decision.branch).toBe("load_bound");
    expect(decision.matchRate).toBe(0);
    expect(c.tree.match(text)).toBe(text.length);
  });

  it("weighs this replica's own in-flight counts, not peers' (as last read), against the bound", () => {
    const policy = cacheAware();
    // Fleet-wide the holder is at 17 of 20 (bound 11); this replica's own share is 3 of 8
    // (own mean 2, bound 5): it keeps the prefix. Issue 20 item 10, cache-pressure with 4 replicas.
    const [a, b, c, d] = fleet4([17, 1, 0, 2]);
    Object.assign(a, { ownInFlight: 3 });
    Object.assign(b, { ownInFlight: 1 });
    Object.assign(c, { ownInFlight: 0 });
    Object.assign(d, { ownInFlight: 4 });
    a.tree.insert(HOT);
    expect(selectWith(policy, [a, b, c, d], { text: `${HOT}question` })).toMatchObject({
      worker: a,
      branch: "cache_hit",
    });
    // Its own share over its own bound: load_bound, to the least loaded fleet-wide.
    Object.assign(a, { ownInFlight: 8 });
    expect(selectWith(policy, [a, b, c, d], { text: `${HOT}question` })).toMatchObject({
      worker: c,
      branch: "load_bound",
    });
  });

  it("keeps the cache hit while the holder is within the bound", () => {
    const policy = cacheAware();
    // Mean 5, bound 11: the holder at 11 is still within it.
    const [a, b, c, d] = fleet4([11, 4, 3, 2]);
    a.tree.insert(HOT);
    expect(selectWith(policy, [a, b, c, d], { text: `${HOT}question` })).toMatchObject({
      worker: a,
      branch: "cache_hit",
    });
  });

  it("prefers a holder within the bound over one above it", () => {
    const policy = cacheAware();
    const [a, b, c, d] = fleet4([17, 1, 0, 2]);
    a.tree.insert(HOT);
    b.tree.insert(HOT);
    expect(selectWith(policy, [a, b, c, d], { text: `${HOT}question` })).toMatchObject({
      worker: b,
      branch: "cache_hit",
    });
  });

  it("with cacheLoadBound 0 behaves as the SGLang router: the holder wins however loaded", () => {
    const policy = cacheAware({ cacheLoadBound: 0 });
    const [a, b, c, d] = fleet4([60, 0, 0, 0]);
    a.tree.insert(HOT);
    expect(selectWith(policy, [a, b, c, d], { text: `${HOT}question` })).toMatchObject({
      worker: a,
      branch: "cache_hit",
    });
  });

  it("spreads a hot prefix over several workers as in-flight requests pile up (regression: 384/0/0/0 in bench:routing)", () => {
    for (const bound of [2, 1.5]) {
      const policy = cacheAware({ cacheLoadBound: bound });
      const workers = fleet(4);
      const served = new Map<FakeWorker, number>();
      // 32 requests in flight at once, none finishing: the closed-loop peak of the benchmark.
      for (let i = 0; i < 32; i++) {
        const decision = selectWith(policy, workers, { text: `${HOT}question ${i}` })!;
        decision.worker.inFlight++;
        served.set(decision.worker, (served.get(decision.worker) ?? 0) + 1);
      }
      expect(served.size, `bound ${bound}`).toBeGreaterThanOrEqual(2);
      expect(Math.max(...served.values()), `bound ${bound}`).toBeLessThanOrEqual(18);
    }
    // Without a bound, every request goes to the first holder.
    const unbounded = cacheAware({ cacheLoadBound: 0 });
    const workers = fleet(4);
    for (let i = 0; i < 32; i++)
      selectWith(unbounded, workers, { text: `${HOT}question ${i}` })!.worker.inFlight++;
    expect(workers.map((w) => w.inFlight).sort((x, y) => y - x)[0]).toBe(32);
  });
});
