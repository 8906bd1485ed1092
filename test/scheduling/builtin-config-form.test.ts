import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { builtinConfig, createPolicy } from "../../src/scheduling/builtin-profiles.js";
import { type PolicyOptions, resolvePolicyOptions } from "../../src/scheduling/options.js";
import { POLICY_NAMES, type Policy, type PolicyName } from "../../src/scheduling/policy.js";
import { buildProfiles, loadSchedulerConfig } from "../../src/scheduling/scheduler-config.js";
import { seededRandom } from "./fake-worker.js";
import { type TestWorker, worker } from "./helpers.js";

const EXAMPLES = new URL("../../docs/scheduler/", import.meta.url).pathname;

/**
 * The same requests, loads and matches through two policies, one decision at a time: what each
 * chose, and why. The fleet changes as it goes (loads, queues, a worker missing now and then), so
 * every branch of the load rules is reached.
 */
function decisions(policy: Policy): string[] {
  const random = seededRandom(11);
  const fleet: TestWorker[] = ["a", "b", "c", "d", "e"].map((id) => worker(id));
  const out: string[] = [];
  for (let i = 0; i < 400; i++) {
    for (const w of fleet) {
      w.inFlight = Math.floor(random() * (i % 50 === 0 ? 200 : 6));
      w.pendingPrefillChars = Math.floor(random() * 2000);
      w.pendingPrefillRequests = Math.floor(random() * 3);
      w.foreign = random() < 0.2 ? Math.floor(random() * 4) : undefined;
    }
    const candidates = i % 7 === 3 ? fleet.slice(1) : fleet;
    const text = i % 9 === 0 ? "" : `tenant ${i % 4} ${"shared preamble ".repeat(20)} q${i}`;
    const matched = candidates.map(() =>
      random() < 0.5 ? 0 : Math.floor(random() * (text.length + 1)),
    );
    const session = i % 5 === 0 ? candidates[i % candidates.length]!.id : undefined;
    const d = policy.select(candidates, { text, matched, sessionWorker: session });
    out.push(d === undefined ? "none" : `${d.worker.id}:${d.branch}:${d.matchRate}`);
  }
  return out;
}

describe("every --policy NAME as a --scheduler-config document", () => {
  it.each(POLICY_NAMES)(
    "%s: docs/scheduler/NAME.yaml decides as the flag does, request for request",
    (name) => {
      const flag = createPolicy(name, { random: seededRandom(5) });
      const [file] = loadSchedulerConfig(join(EXAMPLES, `${name}.yaml`), seededRandom(5));
      expect(file!.name).toBe(name);
      expect(file!.usesPrefixes).toBe(flag.usesPrefixes);
      expect(decisions(file!)).toEqual(decisions(flag));
    },
  );

  const tuned: [PolicyName, PolicyOptions][] = [
    ["cache_aware", { cacheThreshold: 0.6, balanceAbsThreshold: 3, cacheLoadBound: 0 }],
    ["cache_aware", { balanceRelThreshold: 1, cacheLoadBound: 1 }],
    ["prefix_cost", { prefixCostQueueWeight: 2, prefixCostRequestChars: 0 }],
    ["prefix_cost", { prefixCostTieBreak: "rotation" }],
  ];
  it.each(tuned)("%s with flags %j: its document carries them", (name, options) => {
    const flag = createPolicy(name, { ...options, random: seededRandom(5) });
    const doc = builtinConfig(name, resolvePolicyOptions(options));
    const [config] = buildProfiles(JSON.parse(JSON.stringify(doc)), { random: seededRandom(5) });
    expect(decisions(config!)).toEqual(decisions(flag));
  });
});
