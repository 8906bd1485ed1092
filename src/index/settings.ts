/**
 * The prefix index: which one (--prefix-index), its budgets and the eviction timer
 * (assembly/index-stack.ts builds it from IndexConfig).
 */
import { autoOr, flagValue, integer, number, oneOf, SEC, seconds } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { DEFAULT_BLOCK_CHARS, DEFAULT_CAPACITY_BLOCKS } from "./block-hash-index.js";
import { PREFIX_INDEX_NAMES, type PrefixIndexName } from "./factory.js";

export interface IndexConfig {
  /** --eviction-interval: between LRU passes over every tree; 0 = timer off. */
  evictionIntervalMs: number;
  /** A fixed budget in characters, or "auto": learned from each worker's KV capacity. */
  maxTreeSize: number | "auto";
  treeCapacityFactor: number;
  prefixIndex: PrefixIndexName;
  /** Characters a block, or "auto": 16 tokens × 4 until a vLLM worker reports its block size. */
  blockHashChars: number | "auto";
  blockHashCapacity: number;
  /** --dp-aware: one tree per data-parallel rank, requests sent to the rank chosen. */
  dpAware: boolean;
}

export const INDEX_SETTINGS = section<IndexConfig>({
  evictionIntervalMs: {
    flag: "--eviction-interval",
    // Named as before the flag lost its unit suffix (tests and overrides use this name).
    name: "evictionIntervalSecs",
    arg: "<secs>",
    description:
      "Seconds between LRU eviction passes over every tree (0 = timer off; inserts still evict past 110% of a fixed budget, and past a learned one at once).",
    default: 120 * SEC,
    parse: seconds(0),
  },
  maxTreeSize: {
    flag: "--max-tree-size",
    arg: "<chars|auto>",
    description:
      "Budget of each worker's prefix tree, in characters. auto = the worker's KV capacity in tokens (learned from its engine) x its characters per token x --tree-capacity-factor, kept exactly (no slack on insert); 67108864 (2^26) until a capacity is known. A number fixes the budget for every worker.",
    default: "auto",
    parse: autoOr(integer(1)),
  },
  treeCapacityFactor: {
    flag: "--tree-capacity-factor",
    arg: "<x>",
    description:
      "With --max-tree-size auto: multiplies each learned budget (below 1 the trees forget sooner than the engines, above 1 later).",
    default: 1,
    parse: number(0, 100, { minExclusive: true }),
  },
  prefixIndex: {
    flag: "--prefix-index",
    arg: "<name>",
    description:
      "Prefix index: shared (one tree per model whose nodes record which workers hold them; a decision walks it once) | approx (one radix tree per worker; a decision walks every candidate's tree), the same answers to the character | block_hash (GIE/llm-d's and AIBrix's approximate index: chained hashes of fixed character blocks, an LRU of blocks per worker; matches in whole blocks).",
    default: "shared",
    parse: oneOf(PREFIX_INDEX_NAMES),
  },
  blockHashChars: {
    flag: "--block-hash-chars",
    arg: "<chars|auto>",
    description: `--prefix-index block_hash: characters a block (AIBrix's character blocks: 128). auto = GIE/llm-d's: the first vLLM worker's KV block size (vllm:cache_config_info block_size) x 4 characters a token, ${DEFAULT_BLOCK_CHARS} (16 tokens) until one reports it. A text's partial last block is not hashed.`,
    default: "auto",
    parse: autoOr(integer(1, 1_048_576)),
  },
  blockHashCapacity: {
    flag: "--block-hash-capacity",
    arg: "<blocks>",
    description:
      "--prefix-index block_hash: blocks each worker's LRU holds (GIE's default, about 500k tokens of KV) until its engine's KV capacity is learned (--max-tree-size auto); a fixed --max-tree-size replaces it (its characters / --block-hash-chars).",
    default: DEFAULT_CAPACITY_BLOCKS,
    parse: integer(1, 1 << 30),
  },
  dpAware: {
    flag: "--dp-aware",
    arg: "[bool]",
    description:
      "Route to the data-parallel ranks of each engine, as SGLang's gateway does: the ranks are read from the engine (SGLang's /get_server_info dp_size, vLLM's per-engine metrics), each rank gets its own prefix tree, and a request goes to its worker's best rank (X-data-parallel-rank, or data_parallel_rank in SGLang's /generate body). With --kv-events the ranks come from the engines' event streams instead.",
    default: false,
    parse: flagValue,
  },
});
