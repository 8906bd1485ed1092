/** The fleet saturation signal's settings (admission/fleet-capacity.ts, GET /debug/capacity). */
import { integer, number, SEC, seconds } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import type { FleetCapacityOptions } from "./fleet-capacity.js";

export type FleetConfig = FleetCapacityOptions;

export const FLEET_SETTINGS = section<FleetConfig>({
  pollMs: {
    flag: "--fleet-signal-interval-secs",
    arg: "<secs>",
    description:
      "How often the fleet saturation signal is sampled (radixgate_fleet_saturation_ratio, radixgate_fleet_desired_workers, radixgate_fleet_cache_pressure_ratio, GET /debug/capacity). 0 = off.",
    default: 5 * SEC,
    parse: seconds(0),
  },
  targetUtilization: {
    flag: "--fleet-target-utilization",
    arg: "<ratio>",
    description:
      "The saturation desired workers aims at: ceil(workers x saturation / this). Below 1 leaves headroom for bursts.",
    default: 0.8,
    parse: number(0, 1, { minExclusive: true }),
  },
  cooldownMs: {
    flag: "--fleet-scale-down-cooldown-secs",
    arg: "<secs>",
    description:
      "Desired workers falls only to the largest value of this last window (it rises at once), and the cache pressure counts the evictions of this window.",
    default: 300 * SEC,
    parse: seconds(0),
  },
  prefillTokensPerSec: {
    flag: "--worker-prefill-tokens-per-sec",
    arg: "<tokens>",
    description:
      "Uncached prompt tokens a second one worker is assumed to prefill at full load (measure your engine and model: e.g. `vllm bench serve` or SGLang's bench_serving at the batch size you run; a figure below the engines' makes every cache miss read as saturation).",
    default: 10_000,
    parse: integer(1),
  },
  defaultSlots: {
    flag: "--worker-default-slots",
    arg: "<n>",
    description:
      "Requests a worker runs at once when its engine did not say (SGLang reports max_running_requests; for vLLM give its --max-num-seqs).",
    default: 256,
    parse: integer(1),
  },
});
