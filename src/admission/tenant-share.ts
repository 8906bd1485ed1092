import { freeSlots, fullBatchOf, type SaturationView } from "../workers/saturation.js";

/** A tenant counts as active this long after its last request (2 light requests a second each). */
export const ACTIVE_WINDOW_MS = 2000;

interface TenantUse {
  /** Requests admitted and not ended. */
  inFlight: number;
  /** Requests waiting in the router's queue. */
  waiting: number;
  /**
   * The priority band whose requests reach the engine below the others' (yieldsAtEngine), kept
   * while the tenant has requests in flight: its next request of that band goes as low, so it
   * never outranks (and makes the engine preempt) its own earlier work.
   */
  yieldingBand: number | undefined;
}

/** The two latest distinct tenants seen at one priority: whether another than T is active there. */
interface BandSeen {
  last: string;
  lastAt: number;
  /** The latest tenant before `last` that is not `last`. */
  other: string | undefined;
  otherAt: number;
}

/** The candidates' batch slots, and how many are free; undefined when a cap is unknown. */
interface Slots {
  total: number;
  free: number;
}

/**
 * Each tenant's share of the fleet's batch slots, and the rule that keeps slots free for the
 * tenants under it. Engines serve their waiting queue first come, first served (SGLang
 * `--schedule-policy fcfs`, vLLM v1's FCFS), so a request that finds every batch slot full waits
 * for an end there, behind whatever was let in before it, however the router ordered them. While
 * other tenants are active, a tenant holding at least its fair share of the candidates' slots
 * (their caps ÷ the active tenants) goes only when more than `reserve` slots are free: the last
 * `reserve` free slots stay for the others, so their next request starts at the engine's next
 * step instead of after the next end.
 *
 * Active tenants are counted as they change (O(1) per question, whatever --max-tenants): those
 * busy (in flight or waiting) plus those seen in the last ACTIVE_WINDOW_MS and not busy, the
 * latter kept in the order they were last seen and expired from the front. Bounded: tenants are
 * those of the tenant table (--max-tenants), forgotten with it; bands are priorities, [-100, 100].
 */
export class TenantShares {
  private readonly tenants = new Map<string, TenantUse>();
  /** Tenants seen within ACTIVE_WINDOW_MS, least recently seen first, with when. */
  private readonly recent = new Map<string, number>();
  /** Tenants with requests in flight or waiting. */
  private busy = 0;
  /** Tenants in `recent` that are not busy. */
  private recentIdle = 0;
  private readonly bands = new Map<number, BandSeen>();

  constructor(
    /** Slots kept free for tenants under their share (0: off). */
    readonly reserve: number,
  ) {}

  /** The tenant asked now (whether it goes at once or waits), at `priority` when given. */
  seen(tenant: string, now: number, priority?: number): void {
    this.expire(now);
    const use = this.use(tenant);
    if (this.recent.has(tenant)) this.recent.delete(tenant);
    else if (!isBusy(use)) this.recentIdle += 1;
    this.recent.set(tenant, now);
    if (priority !== undefined) this.seenInBand(tenant, priority, now);
  }

  started(tenant: string): void {
    this.change(tenant, (use) => {
      use.inFlight += 1;
    });
  }

  ended(tenant: string): void {
    this.change(tenant, (use) => {
      if (use.inFlight > 0) use.inFlight -= 1;
      if (use.inFlight === 0) use.yieldingBand = undefined;
    });
  }

  /** One more (1) or one fewer (-1) of the tenant's requests waits in the router's queue. */
  queued(tenant: string, delta: 1 | -1): void {
    this.change(tenant, (use) => {
      use.waiting = Math.max(0, use.waiting + delta);
    });
  }

  inFlight(tenant: string): number {
    return this.tenants.get(tenant)?.inFlight ?? 0;
  }

  /** The tenant left the tenant table (idle a minute): its count goes with it (bounded memory). */
  forget(tenant: string): void {
    const use = this.tenants.get(tenant);
    if (use === undefined) return;
    if (isBusy(use)) this.busy -= 1;
    else if (this.recent.has(tenant)) this.recentIdle -= 1;
    this.recent.delete(tenant);
    this.tenants.delete(tenant);
  }

  /** Other tenants with requests in flight, waiting, or one within ACTIVE_WINDOW_MS. */
  othersActive(tenant: string, now: number): number {
    this.expire(now);
    const use = this.tenants.get(tenant);
    const self = use !== undefined && (isBusy(use) || this.recent.has(tenant)) ? 1 : 0;
    return this.busy + this.recentIdle - self;
  }

  /**
   * Whether the tenant's request must wait so the last free slots stay for the others: other
   * tenants are active, it holds at least its fair share of the candidates' slots, and no more
   * than `reserve` are free. Never when a candidate's cap is unknown (nothing is guessed).
   */
  heldForOthers(tenant: string, candidates: readonly SaturationView[], now: number): boolean {
    const slots = this.overShareSlots(tenant, candidates, now);
    return slots !== undefined && slots.free <= this.reserve;
  }

  /**
   * Whether the reserve rule applies to the tenant now: other tenants are active and it holds at
   * least its fair share of the candidates' slots (heldForOthers holds it while no more than
   * `reserve` are free; admission-queue.ts also paces it). Never when a cap is unknown.
   */
  overShare(tenant: string, candidates: readonly SaturationView[], now: number): boolean {
    return this.overShareSlots(tenant, candidates, now) !== undefined;
  }

  /** The candidates' slots when the tenant is over its share with others active, else undefined. */
  private overShareSlots(
    tenant: string,
    candidates: readonly SaturationView[],
    now: number,
  ): Slots | undefined {
    if (this.reserve === 0 || candidates.length === 0) return undefined;
    const others = this.othersActive(tenant, now);
    if (others === 0) return undefined;
    const slots = slotsOf(candidates, now);
    if (slots === undefined || this.inFlight(tenant) < slots.total / (others + 1)) return undefined;
    return slots;
  }

  /**
   * Whether the request must wait for a slot to free because the candidates have none and other
   * tenants share them (the release rule): a worker whose batch is full counts as having room at
   * --saturation-queue-depth 1, but what the router lets go there waits in the engine's
   * first-come queue for an end on that one worker, while a request held here takes the first
   * slot that frees on any of them. Never when a cap is unknown, nor for a tenant alone.
   */
  noFreeSlot(tenant: string, candidates: readonly SaturationView[], now: number): boolean {
    if (this.reserve === 0 || candidates.length === 0) return false;
    if (this.othersActive(tenant, now) === 0) return false;
    const slots = slotsOf(candidates, now);
    return slots !== undefined && slots.free === 0;
  }

  /**
   * Whether the tenant's request of `priority` should reach the engine below the other tenants'
   * requests of that priority (--engine-priority): another tenant was active at that priority in
   * the last ACTIVE_WINDOW_MS and this one holds at least its fair share of the candidates'
   * slots; or its requests of that priority already go lower and some are in flight (so its own
   * next one never outranks them). Undefined when a cap is unknown (the share is not known).
   */
  yieldsAtEngine(
    tenant: string,
    priority: number,
    candidates: readonly SaturationView[],
    now: number,
  ): boolean | undefined {
    if (this.yieldingAt(tenant, priority)) return true;
    const slots = candidates.length === 0 ? undefined : slotsOf(candidates, now);
    if (slots === undefined) return undefined;
    if (!this.othersInBand(tenant, priority, now)) return false;
    return this.inFlight(tenant) >= slots.total / (this.othersActive(tenant, now) + 1);
  }

  /** Whether the tenant's requests of `priority` already go lower, some of them in flight. */
  yieldingAt(tenant: string, priority: number): boolean {
    const use = this.tenants.get(tenant);
    return use !== undefined && use.yieldingBand === priority && use.inFlight > 0;
  }

  /** A request of the tenant's went to the engine lower at `priority` (see yieldsAtEngine). */
  yielding(tenant: string, priority: number): void {
    const use = this.tenants.get(tenant);
    if (use !== undefined && use.inFlight > 0) use.yieldingBand = priority;
  }

  private seenInBand(tenant: string, priority: number, now: number): void {
    const band = this.bands.get(priority);
    if (band === undefined) {
      this.bands.set(priority, { last: tenant, lastAt: now, other: undefined, otherAt: 0 });
      return;
    }
    if (band.last !== tenant) {
      band.other = band.last;
      band.otherAt = band.lastAt;
      band.last = tenant;
    }
    band.lastAt = now;
  }

  /**
   * Whether any tenant asked within ACTIVE_WINDOW_MS at a priority more than `gap` above
   * `priority` (engines preempting past a threshold of `gap` put `priority`'s work behind it).
   * Bands are at most the priorities' range, and in practice a few.
   */
  bandAbove(priority: number, gap: number, now: number): boolean {
    for (const [band, seen] of this.bands) {
      if (band - priority > gap && now - seen.lastAt < ACTIVE_WINDOW_MS) return true;
    }
    return false;
  }

  /** Whether a tenant other than this one asked at `priority` within ACTIVE_WINDOW_MS. */
  private othersInBand(tenant: string, priority: number, now: number): boolean {
    const band = this.bands.get(priority);
    if (band === undefined) return false;
    if (band.last !== tenant) return now - band.lastAt < ACTIVE_WINDOW_MS;
    return band.other !== undefined && now - band.otherAt < ACTIVE_WINDOW_MS;
  }

  private use(tenant: string): TenantUse {
    let use = this.tenants.get(tenant);
    if (use === undefined) {
      use = { inFlight: 0, waiting: 0, yieldingBand: undefined };
      this.tenants.set(tenant, use);
    }
    return use;
  }

  /** Applies `update` to the tenant's counts, keeping the busy and recent-idle tallies. */
  private change(tenant: string, update: (use: TenantUse) => void): void {
    const use = this.use(tenant);
    const before = isBusy(use);
    update(use);
    const after = isBusy(use);
    if (before === after) return;
    this.busy += after ? 1 : -1;
    if (this.recent.has(tenant)) this.recentIdle += after ? -1 : 1;
  }

  /** Drops the tenants last seen ACTIVE_WINDOW_MS ago or more (the map's front). */
  private expire(now: number): void {
    for (const [tenant, at] of this.recent) {
      if (now - at < ACTIVE_WINDOW_MS) return;
      this.recent.delete(tenant);
      const use = this.tenants.get(tenant);
      if (use === undefined || !isBusy(use)) this.recentIdle -= 1;
    }
  }
}

function isBusy(use: TenantUse): boolean {
  return use.inFlight > 0 || use.waiting > 0;
}

/** The candidates' batch caps and free slots; undefined when a cap is unknown (never guessed). */
function slotsOf(candidates: readonly SaturationView[], now: number): Slots | undefined {
  let total = 0;
  let free = 0;
  for (const worker of candidates) {
    // Free first: it learns the batch from the reading that fullBatchOf then says.
    const slots = freeSlots(worker, now);
    const cap = fullBatchOf(worker);
    if (cap === undefined || slots === undefined) return undefined;
    total += cap;
    if (slots > 0) free += slots;
  }
  return { total, free };
}
