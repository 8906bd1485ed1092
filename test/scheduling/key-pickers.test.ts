import { describe, expect, it } from "vitest";
import { configFromArgv } from "../../src/cli-options.js";
import { flagValues } from "../../src/config.js";
import { createPolicy } from "../../src/scheduling/builtin-profiles.js";
import type { RouteRequest } from "../../src/scheduling/policy.js";
import { seededRandom } from "./fake-worker.js";
import { type TestWorker, worker } from "./helpers.js";

const fleet = (n: number): TestWorker[] => Array.from({ length: n }, (_, i) => worker(`w${i}`));
const pick = (
  policy: ReturnType<typeof createPolicy>,
  ws: readonly TestWorker[],
  request: RouteRequest,
) => policy.select(ws, request);

describe("prefix_hash (SGLang's prefix_hash.rs)", () => {
  const tenant = (t: number, rest: string) => `tenant ${t} ${"system prompt ".repeat(80)}${rest}`;

  it("sends texts sharing their first --prefix-token-count tokens to one worker", () => {
    const policy = createPolicy("prefix_hash", { prefixTokenCount: 64 });
    const ws = fleet(4);
    const homes = new Set<string>();
    for (let q = 0; q < 20; q++)
      homes.add(pick(policy, ws, { text: tenant(1, `q${q}`) })!.worker.id);
    expect(homes.size).toBe(1);
    expect(pick(policy, ws, { text: tenant(1, "x") })!.branch).toBe("ring_home");
    // Different starts spread over the ring.
    const spread = new Set<string>();
    for (let t = 0; t < 40; t++)
      spread.add(pick(policy, ws, { text: `${t} ${tenant(t, "")}` })!.worker.id);
    expect(spread.size).toBeGreaterThan(1);
  });

  it("reads only the first prefixTokenCount × 4 characters", () => {
    const policy = createPolicy("prefix_hash", { prefixTokenCount: 2 });
    const ws = fleet(8);
    const a = pick(policy, ws, { text: "abcdefgh and one tail" })!.worker.id;
    for (const tail of ["x", "y", "another", "a much longer different tail"]) {
      expect(pick(policy, ws, { text: `abcdefgh${tail}` })!.worker.id).toBe(a);
    }
  });

  it("leaves an overloaded home (load > 1.25 × mean, counting the request) for the least loaded", () => {
    const policy = createPolicy("prefix_hash");
    const ws = fleet(4);
    const text = tenant(7, "q");
    const home = pick(policy, ws, { text })!.worker;
    home.inFlight = 10;
    let load = 1;
    for (const w of ws) if (w !== home) w.inFlight = load++;
    const moved = pick(policy, ws, { text })!;
    expect(moved.branch).toBe("ring_walk");
    expect(moved.worker.inFlight).toBe(1);
    // Every worker over the bound: the home anyway (SGLang's "use initial worker anyway").
    for (const w of ws) w.inFlight = 10;
    home.inFlight = 11;
    expect(pick(policy, ws, { text })!.worker).toBe(home);
  });

  it("an empty text goes to the least loaded", () => {
    const ws = fleet(3);
    ws[0]!.inFlight = 2;
    ws[2]!.inFlight = 1;
    const d = pick(createPolicy("prefix_hash"), ws, { text: "" })!;
    expect([d.worker.id, d.branch]).toEqual(["w1", "least_load"]);
  });
});

describe("consistent_hashing (SGLang's consistent_hashing.rs)", () => {
  it("x-smg-target-worker routes to that candidate, or to none", () => {
    const policy = createPolicy("consistent_hashing");
    const ws = fleet(3);
    const to = (target: string) =>
      pick(policy, ws, { text: "t", headers: { "x-smg-target-worker": target } });
    expect(to("1")).toMatchObject({ worker: ws[1], branch: "target_worker" });
    expect(to("w2")!.worker).toBe(ws[2]);
    expect(to("5")).toBeUndefined();
    expect(to("nope")).toBeUndefined();
  });

  it("x-smg-routing-key (else Authorization, X-Forwarded-For, Cookie) keeps a key on its worker", () => {
    const policy = createPolicy("consistent_hashing");
    const ws = fleet(5);
    for (const name of ["x-smg-routing-key", "authorization", "x-forwarded-for", "cookie"]) {
      const ids = new Set<string>();
      for (let i = 0; i < 10; i++) {
        const d = pick(policy, ws, { text: `q${i}`, headers: { [name]: "user-42" } })!;
        expect(d.branch).toBe("ring_home");
        ids.add(d.worker.id);
      }
      expect(ids.size).toBe(1);
    }
  });

  it("moves only the keys of a worker that left", () => {
    const policy = createPolicy("consistent_hashing");
    const ws = fleet(4);
    const home = (key: string, of: readonly TestWorker[]) =>
      pick(policy, of, { text: "", headers: { "x-smg-routing-key": key } })!.worker.id;
    const keys = Array.from({ length: 200 }, (_, i) => `user-${i}`);
    const before = keys.map((k) => home(k, ws));
    const without = ws.filter((w) => w.id !== "w1");
    keys.forEach((k, i) => {
      if (before[i] !== "w1") expect(home(k, without)).toBe(before[i]);
    });
  });

  it("without a key: random among the candidates", () => {
    const policy = createPolicy("consistent_hashing", { random: seededRandom(3) });
    const ws = fleet(4);
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) {
      const d = pick(policy, ws, { text: "t" })!;
      expect(d.branch).toBe("random");
      seen.add(d.worker.id);
    }
    expect(seen.size).toBe(4);
  });
});

describe("manual (SGLang's manual.rs)", () => {
  it("keeps a routing key on the worker it was first given, whatever the load", () => {
    const policy = createPolicy("manual", { random: seededRandom(9) });
    const ws = fleet(4);
    const headers = { "x-smg-routing-key": "chat-1" };
    const first = pick(policy, ws, { text: "a", headers })!;
    expect(first.branch).toBe("key_assigned");
    first.worker.inFlight = 50;
    for (let i = 0; i < 10; i++) {
      const again = pick(policy, ws, { text: `b${i}`, headers })!;
      expect([again.worker, again.branch]).toEqual([first.worker, "session"]);
    }
  });

  it("a key whose worker left gets another, and returns to neither until that one leaves", () => {
    const policy = createPolicy("manual", { random: seededRandom(2) });
    const ws = fleet(3);
    const headers = { "x-smg-routing-key": "k" };
    const home = pick(policy, ws, { text: "", headers })!.worker;
    const rest = ws.filter((w) => w !== home);
    const moved = pick(policy, rest, { text: "", headers })!;
    expect(moved.branch).toBe("key_assigned");
    // Both remembered (SGLang keeps 2): the first while it is a candidate again.
    expect(pick(policy, ws, { text: "", headers })!.worker).toBe(home);
    expect(pick(policy, rest, { text: "", headers })!.worker).toBe(moved.worker);
  });

  it("keys on the --session-affinity session without the header; random without either", () => {
    const policy = createPolicy("manual", { random: seededRandom(4) });
    const ws = fleet(4);
    const home = pick(policy, ws, { text: "", session: "s1" })!.worker;
    for (let i = 0; i < 5; i++)
      expect(pick(policy, ws, { text: "", session: "s1" })!.worker).toBe(home);
    expect(pick(policy, ws, { text: "" })!.branch).toBe("random");
  });
});

describe("--policy and --prefix-token-count", () => {
  it("accepts SGLang's keyed policies and its prefix_hash parameter", () => {
    for (const name of ["prefix_hash", "consistent_hashing", "manual"]) {
      expect(flagValues(configFromArgv(["--policy", name])).policy).toBe(name);
    }
    expect(flagValues(configFromArgv(["--prefix-token-count", "64"])).prefixTokenCount).toBe(64);
    expect(() => configFromArgv(["--prefix-token-count", "0"])).toThrow(/--prefix-token-count/);
  });

  it("a bad policy's error lists the policies and points at --session-affinity", () => {
    expect(() => configFromArgv(["--policy", "sticky"])).toThrow(
      /--policy must be one of .*manual.*; .*--session-affinity header\|user/,
    );
  });
});
