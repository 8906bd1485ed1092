/**
 * The tiers an engine keeps KV blocks on, read from the `medium` of its KV events, and how much a
 * block held on each saves of its prefill (--kv-tier-weights).
 *
 * Mediums the engines publish (checked in their source):
 * - vLLM: vllm/distributed/kv_events.py MEDIUM_GPU "GPU" for the GPU prefix cache; the offloading
 *   connector (vllm/distributed/kv_transfer/kv_connector/v1/offloading/events.py) publishes
 *   BlockStored / BlockRemoved with MEDIUM_CPU "CPU" or MEDIUM_STORAGE "STORAGE" for the blocks it
 *   offloads, under the same block hashes as on the GPU.
 * - LMCache through vLLM's LMCacheConnectorV1 (vllm/distributed/kv_transfer/kv_connector/v1/
 *   lmcache_connector.py): BlockStored with LMCache's own `medium`, and no BlockRemoved.
 * - SGLang's upstream events (python/sglang/srt/disaggregation/kv_events.py) carry no medium: its
 *   hierarchical cache publishes nothing per tier. A HiCache integration seen in a fork names the
 *   host tier "CPU_TIER1" and the storage tier "CPU_TIER2" (read here as CPU and disk).
 *
 * Anything else that is not a GPU is read as the slowest tier (disk): credited least.
 */
import { ConfigError } from "../errors.js";

export type KvTier = 0 | 1 | 2;
export const GPU_TIER: KvTier = 0;
export const CPU_TIER: KvTier = 1;
export const DISK_TIER: KvTier = 2;
export const TIER_COUNT = 3;
export const TIER_NAMES = ["gpu", "cpu", "disk"] as const;

/** The share of a prefill a block held on each tier saves (a GPU hit saves all of it). */
export interface TierWeights {
  readonly gpu: number;
  readonly cpu: number;
  readonly disk: number;
}

/** The tier of an event's medium; no medium is the GPU (older vLLM, SGLang). */
export function tierOf(medium: string | null): KvTier {
  if (medium === null) return GPU_TIER;
  const m = medium.toUpperCase();
  if (m === "GPU" || m === "CUDA" || m === "HBM") return GPU_TIER;
  if (m === "CPU" || m === "CPU_TIER1" || m === "HOST" || m === "DRAM" || m === "LOCALCPUBACKEND")
    return CPU_TIER;
  return DISK_TIER;
}

/** --kv-tier-weights's default: a CPU hit is a transfer (about a fifth of the prefill it saves). */
export const DEFAULT_TIER_WEIGHTS = "gpu=1,cpu=0.8,disk=0.3";

/**
 * `gpu=1,cpu=0.8,disk=0.3` → weights. Each tier at most once, each weight in [0, 1]; a tier left
 * out keeps its default; gpu must be above 0, and no lower tier may weigh more than a faster one.
 */
export function parseTierWeights(raw: string, flag = "--kv-tier-weights"): TierWeights {
  const weights: Record<string, number> = { gpu: 1, cpu: 0.8, disk: 0.3 };
  const seen = new Set<string>();
  for (const part of raw.split(",")) {
    const item = part.trim();
    if (item === "") continue;
    const eq = item.indexOf("=");
    const name = (eq < 0 ? item : item.slice(0, eq)).trim().toLowerCase();
    if (!(TIER_NAMES as readonly string[]).includes(name))
      throw new ConfigError(flag, `has an unknown tier "${name}"; expected gpu, cpu or disk`);
    if (seen.has(name)) throw new ConfigError(flag, `names the tier "${name}" twice`);
    seen.add(name);
    const text = eq < 0 ? "" : item.slice(eq + 1).trim();
    const value = Number(text);
    if (text === "" || !Number.isFinite(value) || value < 0 || value > 1)
      throw new ConfigError(flag, `tier "${name}" must weigh a number in [0, 1], got "${text}"`);
    weights[name] = value;
  }
  const { gpu, cpu, disk } = weights as unknown as TierWeights;
  if (!(gpu > 0)) throw new ConfigError(flag, "gpu must weigh more than 0");
  if (cpu > gpu || disk > cpu)
    throw new ConfigError(flag, `needs gpu >= cpu >= disk, got gpu=${gpu},cpu=${cpu},disk=${disk}`);
  return { gpu, cpu, disk };
}

/** The setting's parser: checks the value, keeps it as written out in full (help, docs). */
export function tierWeightsSetting(raw: string, flag: string): string {
  const w = parseTierWeights(raw, flag);
  return `gpu=${w.gpu},cpu=${w.cpu},disk=${w.disk}`;
}
