import { type AccountTotals, addAccount, addTotals, emptyTotals } from "./account-totals.js";
import type { RequestAccount } from "./request-account.js";

const MINUTE_MS = 60_000;
/** Keys (workers, models) one minute keeps apart; the rest share one row. */
const MAX_KEYS_PER_MINUTE = 256;
export const OTHER_KEY = "(other)";
/** The index key of a request that names no model (the shared default). */
export const DEFAULT_MODEL_KEY = "(default)";

interface Minute {
  /** Minutes since the epoch; -1 for a slot not used yet. */
  at: number;
  all: AccountTotals;
  workers: Map<string, AccountTotals>;
  models: Map<string, AccountTotals>;
}

/**
 * The account over the last N minutes: one slot per minute in a ring of N, each with the totals
 * overall, per worker and per model (at most MAX_KEYS_PER_MINUTE of each), so memory is bounded
 * by the window, not by traffic. A request adds to the current minute's three totals.
 */
export class AccountWindow {
  private readonly ring: Minute[];

  constructor(readonly minutes: number) {
    this.ring = Array.from({ length: minutes }, () => ({
      at: -1,
      all: emptyTotals(),
      workers: new Map(),
      models: new Map(),
    }));
  }

  add(account: RequestAccount, now: number): void {
    const minute = this.slot(Math.floor(now / MINUTE_MS));
    addAccount(minute.all, account);
    addAccount(totalsOf(minute.workers, account.workerId), account);
    addAccount(totalsOf(minute.models, account.model ?? DEFAULT_MODEL_KEY), account);
  }

  /** Drops a worker's rows from every minute (it is dead: its figures mean nothing now). */
  forgetWorker(workerId: string): void {
    for (const minute of this.ring) minute.workers.delete(workerId);
  }

  /** The sums over the minutes still in the window at `now`. */
  snapshot(now: number): {
    since: number;
    all: AccountTotals;
    workers: Map<string, AccountTotals>;
    models: Map<string, AccountTotals>;
  } {
    const current = Math.floor(now / MINUTE_MS);
    const oldest = current - this.minutes + 1;
    const all = emptyTotals();
    const workers = new Map<string, AccountTotals>();
    const models = new Map<string, AccountTotals>();
    for (const minute of this.ring) {
      if (minute.at < oldest || minute.at > current) continue;
      addTotals(all, minute.all);
      for (const [key, t] of minute.workers) addTotals(totalsOf(workers, key, Infinity), t);
      for (const [key, t] of minute.models) addTotals(totalsOf(models, key, Infinity), t);
    }
    return { since: oldest * MINUTE_MS, all, workers, models };
  }

  /** The slot of minute `at`, emptied when it last held an older minute. */
  private slot(at: number): Minute {
    const minute = this.ring[at % this.minutes]!;
    if (minute.at !== at) {
      minute.at = at;
      minute.all = emptyTotals();
      minute.workers.clear();
      minute.models.clear();
    }
    return minute;
  }
}

function totalsOf(
  map: Map<string, AccountTotals>,
  key: string,
  maxKeys = MAX_KEYS_PER_MINUTE,
): AccountTotals {
  let totals = map.get(key);
  if (totals !== undefined) return totals;
  const k = map.size < maxKeys ? key : OTHER_KEY;
  totals = map.get(k);
  if (totals === undefined) {
    totals = emptyTotals();
    map.set(k, totals);
  }
  return totals;
}
