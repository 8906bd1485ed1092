/** One waiting request as the fair queue orders it. */
export interface QueueEntry {
  readonly tenant: string;
  readonly priority: number;
  /** Its work in tokens (prompt + the output it asks for): what the tenant's counter is charged. */
  readonly cost: number;
  /** Arrival order, for ties and "newest first" when shedding. */
  seq: number;
}

/** One priority band: its tenants' waiting requests (FIFO each) and their virtual counters. */
class Band<E extends QueueEntry> {
  readonly waiting = new Map<string, E[]>();
  /** Virtual token counters (VTC): the work each tenant was given in this band. */
  readonly counters = new Map<string, number>();
  size = 0;
  constructor(readonly priority: number) {}

  /** The backlogged tenant with the least service so far (ties: see `before`), its oldest request. */
  next(): E | undefined {
    let best: E[] | undefined;
    let bestTenant = "";
    for (const [tenant, entries] of this.waiting) {
      if (best === undefined || this.before(tenant, entries, bestTenant, best)) {
        best = entries;
        bestTenant = tenant;
      }
    }
    return best?.[0];
  }

  /**
   * Whether tenant `a` (its waiting `x`) goes before `b` (`y`): the least service first; on a tie,
   * the tenant with fewer requests waiting, then the older head. A tenant that starts waiting is
   * lifted exactly to the least counter (`lift`), so it ties with the flood it joins: by age alone
   * it would wait for one more of the flood's requests, and an idle tenant would be behind the
   * busy one, against VTC's intent.
   */
  before(a: string, x: readonly E[], b: string, y: readonly E[]): boolean {
    const byService = (this.counters.get(a) ?? 0) - (this.counters.get(b) ?? 0);
    if (byService !== 0) return byService < 0;
    if (x.length !== y.length) return x.length < y.length;
    return (x[0] as E).seq < (y[0] as E).seq;
  }

  /** The backlogged tenant with the most service so far (the first to lose a request when shedding). */
  heaviest(): string | undefined {
    let heaviest: string | undefined;
    let most = Number.NEGATIVE_INFINITY;
    for (const [tenant, entries] of this.waiting) {
      const counter = (this.counters.get(tenant) ?? 0) + entries.length * 1e-9;
      if (counter > most) {
        most = counter;
        heaviest = tenant;
      }
    }
    return heaviest;
  }

  /**
   * A tenant that starts waiting again is lifted to the least counter of those already waiting
   * (VTC's rule): idle time earns no credit to spend later in a burst, and past use is forgotten
   * once everyone has caught up.
   */
  lift(tenant: string): void {
    let least: number | undefined;
    for (const other of this.waiting.keys()) {
      const counter = this.counters.get(other) ?? 0;
      if (least === undefined || counter < least) least = counter;
    }
    if (least === undefined) return;
    const own = this.counters.get(tenant) ?? 0;
    if (own < least) this.counters.set(tenant, least);
  }
}

/**
 * The admission queue's order (issue 24): requests by priority band, highest first; within a
 * band, tenants served fairly by the work they were given (a virtual token counter per tenant, as
 * in VTC, Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024), not by request
 * count; each tenant's own requests in arrival order. Bounded by its owner: it holds what it is
 * given and says which entry to shed.
 */
export class FairQueue<E extends QueueEntry> {
  /** Bands by priority, and their priorities in descending order. */
  private readonly bands = new Map<number, Band<E>>();
  private order: number[] = [];
  private readonly perTenant = new Map<string, number>();
  private count = 0;
  private seq = 0;

  get size(): number {
    return this.count;
  }

  /** Requests a tenant has waiting, across bands. */
  queuedFor(tenant: string): number {
    return this.perTenant.get(tenant) ?? 0;
  }

  /** Requests waiting at one priority: in all, and the tenant's own. */
  waitingAt(priority: number, tenant: string): { all: number; tenant: number } {
    const band = this.bands.get(priority);
    return { all: band?.size ?? 0, tenant: band?.waiting.get(tenant)?.length ?? 0 };
  }

  push(entry: E): void {
    entry.seq = this.seq++;
    let band = this.bands.get(entry.priority);
    if (band === undefined) {
      band = new Band(entry.priority);
      this.bands.set(entry.priority, band);
      this.order = [...this.bands.keys()].sort((a, b) => b - a);
    }
    let entries = band.waiting.get(entry.tenant);
    if (entries === undefined) {
      band.lift(entry.tenant);
      entries = [];
      band.waiting.set(entry.tenant, entries);
    }
    entries.push(entry);
    band.size += 1;
    this.count += 1;
    this.perTenant.set(entry.tenant, this.queuedFor(entry.tenant) + 1);
  }

  /** The highest priority with a request waiting; undefined when none waits. */
  topPriority(): number | undefined {
    for (const priority of this.order) {
      if ((this.bands.get(priority) as Band<E>).size > 0) return priority;
    }
    return undefined;
  }

  /** The entry that goes next: the highest band, its tenant with the least service. */
  peek(): E | undefined {
    for (const priority of this.order) {
      const band = this.bands.get(priority) as Band<E>;
      if (band.size > 0) return band.next();
    }
    return undefined;
  }

  /**
   * The first entry, in the order the queue serves them, that `ready` accepts, looking at no more
   * than `limit` entries: bands highest first, tenants by least service (ties as in `next`), each tenant's requests
   * in arrival order. For a head that cannot go (its model's workers are saturated) while others
   * could.
   */
  find(ready: (entry: E) => boolean, limit: number): E | undefined {
    let looked = 0;
    for (const priority of this.order) {
      const band = this.bands.get(priority) as Band<E>;
      if (band.size === 0) continue;
      const tenants = [...band.waiting].sort(([a, x], [b, y]) =>
        band.before(a, x, b, y) ? -1 : band.before(b, y, a, x) ? 1 : 0,
      );
      for (const [, entries] of tenants) {
        for (const entry of entries) {
          if (ready(entry)) return entry;
          if (++looked >= limit) return undefined;
        }
      }
    }
    return undefined;
  }

  /** Takes the entry out as served: its tenant's counter is charged its cost. */
  take(entry: E): void {
    if (!this.remove(entry)) return;
    const band = this.bands.get(entry.priority);
    if (band === undefined) return;
    band.counters.set(entry.tenant, (band.counters.get(entry.tenant) ?? 0) + entry.cost);
  }

  /** Takes the entry out unserved (deadline, client gone, shed); false when it was not queued. */
  remove(entry: E): boolean {
    const band = this.bands.get(entry.priority);
    const entries = band?.waiting.get(entry.tenant);
    const at = entries?.indexOf(entry) ?? -1;
    if (band === undefined || entries === undefined || at < 0) return false;
    entries.splice(at, 1);
    if (entries.length === 0) band.waiting.delete(entry.tenant);
    band.size -= 1;
    this.count -= 1;
    const left = this.queuedFor(entry.tenant) - 1;
    if (left > 0) this.perTenant.set(entry.tenant, left);
    else this.perTenant.delete(entry.tenant);
    if (band.size === 0 && band.counters.size > MAX_IDLE_COUNTERS) band.counters.clear();
    return true;
  }

  /**
   * Which queued entry to shed so that `entry` can wait instead, or undefined when it is `entry`
   * that goes (the queue is full): the lowest band's heaviest tenant's newest request, if that band
   * is below the newcomer's, or the same band and a tenant that was given more than the
   * newcomer's. The lowest priority goes first; within a band, the heaviest user.
   */
  victimFor(entry: E): E | undefined {
    for (let i = this.order.length - 1; i >= 0; i--) {
      const band = this.bands.get(this.order[i] as number) as Band<E>;
      if (band.size === 0) continue;
      if (band.priority > entry.priority) return undefined;
      const heaviest = band.heaviest() as string;
      if (band.priority === entry.priority) {
        if (heaviest === entry.tenant) return undefined;
        const theirs = band.counters.get(heaviest) ?? 0;
        const mine = band.counters.get(entry.tenant) ?? 0;
        const theirQueue = band.waiting.get(heaviest)?.length ?? 0;
        const myQueue = band.waiting.get(entry.tenant)?.length ?? 0;
        if (theirs < mine || (theirs === mine && theirQueue <= myQueue + 1)) return undefined;
      }
      const entries = band.waiting.get(heaviest) as E[];
      return entries[entries.length - 1];
    }
    return undefined;
  }

  /** The tenant's own entry to shed for `entry` (its bound is full): its lowest-priority newest, if below. */
  tenantVictimFor(entry: E): E | undefined {
    for (let i = this.order.length - 1; i >= 0; i--) {
      const band = this.bands.get(this.order[i] as number) as Band<E>;
      if (band.priority >= entry.priority) return undefined;
      const entries = band.waiting.get(entry.tenant);
      if (entries !== undefined && entries.length > 0) return entries[entries.length - 1];
    }
    return undefined;
  }

  /** Waiting requests per priority band (metrics). */
  *bandSizes(): Iterable<[number, number]> {
    for (const priority of this.order) {
      const band = this.bands.get(priority) as Band<E>;
      yield [priority, band.size];
    }
  }

  /** Waiting requests per tenant (metrics). */
  tenantSizes(): ReadonlyMap<string, number> {
    return this.perTenant;
  }

  /** Forget a tenant's counters (it left the tenant table). */
  forget(tenant: string): void {
    for (const band of this.bands.values()) {
      if (!band.waiting.has(tenant)) band.counters.delete(tenant);
    }
  }
}

/** A band with nothing waiting keeps at most this many counters (bounded memory). */
const MAX_IDLE_COUNTERS = 1024;
