/**
 * The cache account's settings rows (issue 21: each feature owns its rows); config.ts places
 * them as Config.cacheAccount.
 */
import { flagValue, HEADER_NAME, integer, type Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";

/** The flags' values, as config.ts's Config carries them. */
export interface CacheAccountConfig {
  cacheAccount: boolean;
  explainHeader: string | undefined;
  cacheAccountWindowMins: number;
  cacheAccountTopPrefixes: number;
}

/** What the ledger (cache-ledger.ts) takes. */
export interface CacheAccountOptions {
  /** --cache-account: false leaves every request unaccounted (no ledger at all). */
  readonly enabled: boolean;
  /** Response header carrying each request's account (lower case); undefined = none. */
  readonly explainHeader: string | undefined;
  readonly windowMins: number;
  readonly topPrefixes: number;
}

export function cacheAccountOptions(config: CacheAccountConfig): CacheAccountOptions {
  return {
    enabled: config.cacheAccount,
    explainHeader: config.explainHeader,
    windowMins: config.cacheAccountWindowMins,
    topPrefixes: config.cacheAccountTopPrefixes,
  };
}

/** Headers the router or HTTP itself sets: an account under one of these names would clobber it. */
const TAKEN = new Set([
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "x-request-id",
  "x-radixgate-worker",
  "x-radixgate-route",
]);

const headerName: Parser<string | undefined> = (raw, flag) => {
  const name = raw.trim().toLowerCase();
  if (name === "") return undefined;
  if (!HEADER_NAME.test(name))
    throw new ConfigError(flag, `must be an HTTP header name, got "${raw}"`);
  if (TAKEN.has(name)) throw new ConfigError(flag, `must not be "${name}": the router sets it`);
  return name;
};

export const CACHE_ACCOUNT_SETTINGS = section<CacheAccountConfig>({
  cacheAccount: {
    flag: "--cache-account",
    arg: "[bool]",
    description:
      "Keep each request's cache account (available, chosen and reported cached tokens; the radixgate_cache_account_* counters, GET /debug/cache, --explain-header). false = none of it, e.g. to price it with bench:overhead-ab --current-args. See docs/hit-rate.md.",
    default: true,
    parse: flagValue,
  },
  explainHeader: {
    flag: "--explain-header",
    arg: "<name>",
    description:
      "Response header that carries each request's cache account, in tokens: available=<best holder's match>;chosen=<chosen worker's match>;runner_up=<worker>:<match>[;reason=<why not the best>]. Empty = off. See docs/hit-rate.md.",
    default: undefined,
    parse: headerName,
  },
  cacheAccountWindowMins: {
    flag: "--cache-account-window-mins",
    arg: "<mins>",
    description:
      "Minutes of cache account GET /debug/cache sums (per minute, per worker and model); the top-losing prefixes cover the same span.",
    default: 15,
    parse: integer(1, 1440),
  },
  cacheAccountTopPrefixes: {
    flag: "--cache-account-top-prefixes",
    arg: "<n>",
    description:
      "Prefixes GET /debug/cache lists as losing the most tokens to routing, and to eviction (8 times as many are tracked).",
    default: 10,
    parse: integer(1, 100),
  },
});
