/** --kv-events and its event feed's settings (kv-events/setup.ts takes KvEventsConfig). */
import { flagValue, integer, SEC, seconds, text } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { DEFAULT_TIER_WEIGHTS, tierWeightsSetting } from "../index/kv-tiers.js";

export interface KvEventsConfig {
  /** --kv-events: route on the engines' KV-cache events. */
  kvEvents: boolean;
  kvEventsEndpointTemplate: string;
  kvEventsReplayTemplate: string;
  /** Accept ipc:// endpoints from the admin API. */
  kvEventsAllowIpc: boolean;
  kvEventsReplayTimeoutMs: number;
  kvEventsRebuildMs: number;
  kvEventsMaxMessageBytes: number;
  kvEventsDpSize: number;
  kvIndexMaxBlocks: number;
  kvSpeculativeTtlMs: number;
  kvBlockSize: number;
  /** --kv-tier-weights, checked and written out in full (index/kv-tiers.ts parses it). */
  kvTierWeights: string;
  tokenizeTimeoutMs: number;
  tokenizerCacheTokens: number;
  /** "" = none: tokenize through the workers' /tokenize. */
  tokenizerPath: string;
}

export const KV_EVENTS_SETTINGS = section<KvEventsConfig>({
  kvEvents: {
    flag: "--kv-events",
    arg: "[bool]",
    description:
      "Route on the engines' KV-cache events (vLLM/SGLang over ZMQ): a precise block index per worker, with the approximate trees as fallback. See docs/kv-events.md.",
    default: false,
    parse: flagValue,
  },
  kvEventsEndpointTemplate: {
    flag: "--kv-events-endpoint-template",
    arg: "<url>",
    description:
      "Each worker's KV-event publisher; {host} is the worker's host. The admin API can give one per worker (kv_events_endpoint).",
    default: "tcp://{host}:5557",
    parse: text,
  },
  kvEventsReplayTemplate: {
    flag: "--kv-events-replay-template",
    arg: "<url>",
    description:
      "Each worker's KV-event replay endpoint (asked for missed events after a gap); empty = none: a gap drops the worker's precise index until it is rebuilt.",
    default: "tcp://{host}:5558",
    parse: text,
  },
  kvEventsAllowIpc: {
    flag: "--kv-events-allow-ipc",
    arg: "[bool]",
    description:
      "Accept ipc:// KV-event endpoints from the admin API (kv_events_endpoint); refused by default, since a path lets a caller make the router connect to any local socket.",
    default: false,
    parse: flagValue,
  },
  kvEventsReplayTimeoutMs: {
    flag: "--kv-events-replay-timeout-ms",
    arg: "<ms>",
    description: "Longest wait for a replay answer.",
    default: 2000,
    parse: integer(1),
  },
  kvEventsRebuildMs: {
    flag: "--kv-events-rebuild-secs",
    arg: "<secs>",
    description:
      "After events were lost (no replay), how long a worker routes on its approximate tree while its precise index is rebuilt.",
    default: 60 * SEC,
    parse: seconds(0),
  },
  kvEventsMaxMessageBytes: {
    flag: "--kv-events-max-message-bytes",
    arg: "<bytes>",
    description:
      "Largest KV-event batch applied; a bigger one is refused undecoded and counted, and the worker's precise index rebuilds (an engine step publishes well under 1 MiB).",
    default: 4 * 1024 * 1024,
    parse: integer(1024),
  },
  kvEventsDpSize: {
    flag: "--kv-events-dp-size",
    arg: "<n>",
    description:
      "Data-parallel ranks per worker's engine (vLLM --data-parallel-size, SGLang --dp-size): rank r publishes on the endpoint's port + r, gets its own precise index, and requests carry the chosen rank (X-data-parallel-rank). A worker whose engine says more (SGLang /get_server_info dp_size, vLLM's /metrics engine labels) gets that many. See docs/kv-events.md.",
    default: 1,
    parse: integer(1, 64),
  },
  kvIndexMaxBlocks: {
    flag: "--kv-index-max-blocks",
    arg: "<n>",
    description: "Most KV blocks the precise index holds per worker (oldest dropped first).",
    default: 262_144,
    parse: integer(1),
  },
  kvSpeculativeTtlMs: {
    flag: "--kv-speculative-ttl-ms",
    arg: "<ms>",
    description:
      "A routed request's blocks count as held by its worker for this long, unless a BlockStored event confirms them first.",
    default: 2000,
    parse: integer(0),
  },
  kvBlockSize: {
    flag: "--kv-block-size",
    arg: "<tokens>",
    description:
      "Tokens per KV block assumed until a worker's first BlockStored event gives its own (vLLM default 16).",
    default: 16,
    parse: integer(1),
  },
  kvTierWeights: {
    flag: "--kv-tier-weights",
    arg: "<gpu=w,cpu=w,disk=w>",
    description:
      "With --kv-events: how much of a prefill a block on each KV tier saves (the engines' `medium`: GPU, CPU offload, storage), each in [0, 1], gpu >= cpu >= disk. A tier at 0 is not indexed (cpu=0,disk=0: the GPU cache alone). See docs/kv-events.md.",
    default: DEFAULT_TIER_WEIGHTS,
    parse: tierWeightsSetting,
  },
  tokenizeTimeoutMs: {
    flag: "--tokenize-timeout-ms",
    arg: "<ms>",
    description:
      "With --kv-events: longest wait for the worker's /tokenize before a request routes on the approximate trees.",
    default: 50,
    parse: integer(1),
  },
  tokenizerCacheTokens: {
    flag: "--tokenizer-cache-tokens",
    arg: "<n>",
    description: "Tokens kept by the tokenizer cache (per prompt prefix), all entries together.",
    default: 4_000_000,
    parse: integer(0),
  },
  tokenizerPath: {
    flag: "--tokenizer-path",
    arg: "<tokenizer.json>",
    description:
      "With --kv-events: the model's Hugging Face tokenizer.json (or the directory holding it); prompt strings (completions, /generate) are tokenized in the router instead of by the worker's /tokenize; chat messages still use /tokenize (chat template). Empty = none.",
    default: "",
    parse: text,
  },
});
