/**
 * bench:routing's cache account per row (issue 26): the routers' own account of every request
 * that used a prefix index (src/cache-account/), summed over a row's replicas and repeats, and
 * printed as shares of the accounted prompt tokens: cached as the engines reported it, index
 * loss, unchecked, routing loss (by reason) and cold; the parts add up to 100%. A row whose
 * policy reads no prefix index (round_robin, random, the oracle) accounts nothing: "-".
 */
import {
  type AccountTotals,
  addTotals,
  emptyTotals,
} from "../../src/cache-account/account-totals.js";
import type { RunningRouter } from "../../src/server.js";
import { printTable } from "./stats.js";

/** The routers' account since they started (each router is fresh for its row). */
export function routersAccount(routers: readonly RunningRouter[]): AccountTotals | undefined {
  if (routers.length === 0) return undefined;
  const sum = emptyTotals();
  for (const router of routers) addTotals(sum, router.context.cacheLedger.totals);
  return sum;
}

/** Sums the repeats' accounts (undefined when no repeat had one). */
export function combineAccounts(
  accounts: readonly (AccountTotals | undefined)[],
): AccountTotals | undefined {
  const present = accounts.filter((a): a is AccountTotals => a !== undefined);
  if (present.length === 0) return undefined;
  const sum = emptyTotals();
  for (const a of present) addTotals(sum, a);
  return sum;
}

type AccountRow = { row: string; requests: number; account?: AccountTotals | undefined };

/** One table: each row's account as shares of its accounted prompt tokens. */
export function printAccountTable(rows: readonly AccountRow[]): void {
  console.log(
    "cache account (the router's, src/cache-account/): shares of the accounted prompt tokens",
  );
  const { cells, notes } = accountTable(rows);
  printTable(ACCOUNT_COLUMNS, cells);
  for (const note of notes) console.log(note);
}

const ACCOUNT_COLUMNS = [
  "policy",
  "accounted",
  "cached",
  "index loss",
  "unchecked",
  "routing loss",
  "load",
  "session",
  "filter",
  "unknown",
  "cold",
];

/**
 * The table's cells, one row per row given (none is left out), and a note for each row with
 * nothing accounted, saying why: a row of dashes alone read as a missing row.
 */
export function accountTable(rows: readonly AccountRow[]): {
  cells: (string | number)[][];
  notes: string[];
} {
  const notes: string[] = [];
  const cells = rows.map((r) => {
    const a = r.account;
    if (a === undefined || a.requests === 0) {
      notes.push(
        `  ${r.row}: 0 of ${r.requests} requests accounted: its policy reads no prefix index (round_robin, random, the oracle), so the router keeps no account of it; compare its hit rate with the prefix-aware rows'`,
      );
      return [r.row, 0, ...Array(9).fill("-")];
    }
    const share = (n: number) => `${((100 * n) / Math.max(1, a.prompt)).toFixed(1)}%`;
    const { load, session, filter, unknown } = a.routingLoss;
    return [
      r.row,
      a.requests,
      share(a.reported),
      share(a.indexLoss),
      share(a.unreported),
      share(load + session + filter + unknown),
      share(load),
      share(session),
      share(filter),
      share(unknown),
      share(a.cold),
    ];
  });
  return { cells, notes };
}
