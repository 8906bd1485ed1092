import { freeSlots, fullBatchOf, type SaturationView } from "../workers/saturation.js";

/** A tenant counts as active this long after its last request (2 light requests a second each). */
export const ACTIVE_WINDOW_MS = 2000;

interface TenantUse {
  /** Requests admitted and not ended. */
  inFlight: number;
  /** When it last asked (admitted or started waiting). */
  lastSeen: number;
}

/**
 * Each tenant's share of the fleet's batch slots, and the rule that keeps slots free for the
 * tenants under it. Engines serve their waiting queue first come, first served (SGLang
 * `--schedule-policy fcfs`, vLLM v1's FCFS), so a request that finds every batch slot full waits
 * for an end there, behind whatever was let in before it, however the router ordered them. While
 * other tenants are active, a tenant holding at least its fair share of the candidates' slots
 * (their caps ÷ the active tenants) goes only when more than `reserve` slots are free: the last
 * `reserve` free slots stay for the others, so their next request starts at the engine's next
 * step instead of after the next end. Bounded: tenants are those of the tenant table
 * (--max-tenants), forgotten with it.
 */
export class TenantShares {
  private readonly tenants = new Map<string, TenantUse>();

  constructor(
    /** Slots kept free for tenants under their share (0: off). */
    readonly reserve: number,
  ) {}

  /** The tenant asked now (whether it goes at once or waits). */
  seen(tenant: string, now: number): void {
    const use = this.tenants.get(tenant);
    if (use === undefined) this.tenants.set(tenant, { inFlight: 0, lastSeen: now });
    else use.lastSeen = now;
  }

  started(tenant: string): void {
    const use = this.tenants.get(tenant);
    if (use === undefined) this.tenants.set(tenant, { inFlight: 1, lastSeen: 0 });
    else use.inFlight += 1;
  }

  ended(tenant: string): void {
    const use = this.tenants.get(tenant);
    if (use !== undefined && use.inFlight > 0) use.inFlight -= 1;
  }

  inFlight(tenant: string): number {
    return this.tenants.get(tenant)?.inFlight ?? 0;
  }

  /** The tenant left the tenant table (idle a minute): its count goes with it (bounded memory). */
  forget(tenant: string): void {
    this.tenants.delete(tenant);
  }

  /** Other tenants with requests in flight, waiting (`waiting`), or one within ACTIVE_WINDOW_MS. */
  othersActive(tenant: string, now: number, waiting: (t: string) => number): number {
    let others = 0;
    for (const [name, use] of this.tenants) {
      if (name === tenant) continue;
      if (use.inFlight > 0 || now - use.lastSeen < ACTIVE_WINDOW_MS || waiting(name) > 0) {
        others += 1;
      }
    }
    return others;
  }

  /**
   * Whether the tenant's request must wait so the last free slots stay for the others: other
   * tenants are active, it holds at least its fair share of the candidates' slots, and no more
   * than `reserve` are free. Never when a candidate's cap is unknown (nothing is guessed).
   */
  heldForOthers(
    tenant: string,
    candidates: readonly SaturationView[],
    now: number,
    waiting: (t: string) => number,
  ): boolean {
    if (this.reserve === 0 || candidates.length === 0) return false;
    const others = this.othersActive(tenant, now, waiting);
    if (others === 0) return false;
    let total = 0;
    let free = 0;
    for (const worker of candidates) {
      // Free first: it learns the batch from the reading that fullBatchOf then says.
      const slots = freeSlots(worker, now);
      const cap = fullBatchOf(worker);
      if (cap === undefined || slots === undefined) return false;
      total += cap;
      if (slots > 0) free += slots;
    }
    if (this.inFlight(tenant) < total / (others + 1)) return false;
    return free <= this.reserve;
  }
}
