import { RouterError, retryAfterSecs } from "../errors.js";
import { ClientGoneError } from "../proxy/cancel.js";
import {
  fleetSaturated,
  freeSlots,
  type SaturationThresholds,
  type SaturationView,
} from "../workers/saturation.js";
import { FairQueue, type QueueEntry } from "./fair-queue.js";
import type { RequestIdentity } from "./identity.js";
import { yieldDepth } from "./preemption.js";
import type { AdmissionRelease, AdmissionStep, AdmissionTicket } from "./step.js";
import { TenantShares } from "./tenant-share.js";

/** Most waiting requests one release looks at for one with room (each check reads its workers). */
const MAX_SCAN = 64;

export interface AdmissionQueueOptions {
  /** --max-concurrent-requests (0 = no limit). */
  maxConcurrent: number;
  /** --queue-size: requests that may wait in all. */
  queueSize: number;
  /** --max-queued-per-tenant */
  maxQueuedPerTenant: number;
  /** --queue-when-saturated: wait while every candidate is saturated. */
  queueWhenSaturated: boolean;
  thresholds: SaturationThresholds;
  /**
   * --tenant-reserve-slots: with --queue-when-saturated, batch slots kept free for tenants under
   * their fair share while a tenant over it is held (tenant-share.ts; 0 or absent: off).
   */
  reserveSlots?: number;
  /**
   * --hold-for-free-slot: while tenants share the slots (reserveSlots above 0), a request goes
   * only into a free one whatever the depth says (default true).
   */
  holdForFreeSlot?: boolean;
  /**
   * --tenant-reserve-pace: a tenant the reserve holds back (over its share while others are
   * active) goes only into a free slot of a worker with none of this router's prompts in prefill
   * (default true; reserveSlots 0 turns it off with the reserve).
   */
  reservePace?: boolean;
  /** How often a waiting queue looks at the fleet again (engine readings and first bytes move it). */
  recheckMs?: number;
  now?: () => number;
}

/** Why a request leaves the queue without being served (the rejections metric's label). */
export type RefusalReason = "too_many_requests" | "tenant_queue_full" | "shed" | "queue_timeout";

/** What the queue reports (admission-metrics.ts). */
export interface QueueObserver {
  granted(identity: RequestIdentity, waitedMs: number): void;
  refused(identity: RequestIdentity, reason: RefusalReason): void;
}

/** Why a request would wait now (/debug/route), null when it would go at once. */
export type WaitCause =
  | "queue_not_empty"
  | "concurrency_limit"
  | "fleet_saturated"
  | "tenant_share"
  | "priority_paced";

/** Why --queue-when-saturated holds a request (holdCause); undefined: it may go. */
type HoldCause = "fleet_saturated" | "tenant_share" | "priority_paced" | undefined;

class Waiter implements QueueEntry {
  seq = 0;
  timer: NodeJS.Timeout | undefined;
  settled = false;
  /** Counted in its tenant's waiting requests (TenantShares), until it settles. */
  counted = false;
  constructor(
    readonly ticket: AdmissionTicket,
    readonly identity: RequestIdentity,
    readonly cost: number,
    readonly enqueuedAt: number,
    readonly grant: (release: AdmissionRelease) => void,
    readonly fail: (err: Error) => void,
  ) {}
  get tenant(): string {
    return this.identity.tenant;
  }
  get priority(): number {
    return this.identity.priority;
  }
}

/**
 * The router's admission queue. A request goes at once while there is room: fewer than
 * --max-concurrent-requests running and, with --queue-when-saturated, some candidate worker not
 * saturated (saturation.ts), and nobody waiting ahead of it. Otherwise it waits, ordered by
 * priority and tenant fairness (fair-queue.ts), within --queue-size in all and
 * --max-queued-per-tenant per tenant, for at most its timeout. Refusals are 429s with Retry-After:
 * a full queue sheds its lowest priority (the newcomer when that is it); a client that leaves
 * while waiting leaves the queue at once. Waiting requests are released one per turn of the event
 * loop, so each one's dispatch shows in the workers' load before the next is weighed.
 */
export class AdmissionQueue implements AdmissionStep {
  readonly name = "queue";
  private active = 0;
  private readonly queue = new FairQueue<Waiter>();
  private recheck: NodeJS.Timeout | undefined;
  private pumpScheduled = false;
  /** A running mean of the waits, for Retry-After. */
  private meanWaitMs = 1000;
  private readonly now: () => number;
  /** Each tenant's requests in flight, and the reserve rule (--tenant-reserve-slots). */
  private readonly shares: TenantShares;

  private observer: QueueObserver | undefined;
  /** With --engine-priority (admission.ts): whether a request outranks what saturates its fleet. */
  private outranks: ((ticket: AdmissionTicket, now: number) => boolean) | undefined;
  /** With --engine-priority: a tenant over its share reaches the engines below the others. */
  private engineYields = false;

  constructor(
    private readonly options: AdmissionQueueOptions,
    observer?: QueueObserver,
  ) {
    this.now = options.now ?? Date.now;
    this.observer = observer;
    this.shares = new TenantShares(options.queueWhenSaturated ? (options.reserveSlots ?? 0) : 0);
  }

  /** Reports grants and refusals to `observer` (the metrics, which read the queue in turn). */
  observeWith(observer: QueueObserver): void {
    this.observer = observer;
  }

  /**
   * A request whose candidates are all saturated still has room when `rule` says it outranks the
   * work saturating one of them (--engine-priority: outranking.ts); it then goes at once, in its
   * turn of the queue's order.
   */
  releaseOutrankingWith(rule: (ticket: AdmissionTicket, now: number) => boolean): void {
    this.outranks = rule;
    this.engineYields = true;
  }

  get enabled(): boolean {
    return this.options.maxConcurrent > 0 || this.options.queueWhenSaturated;
  }

  get waiting(): number {
    return this.queue.size;
  }

  get running(): number {
    return this.active;
  }

  /** Requests waiting at one priority: in all, and one tenant's. */
  waitingAt(priority: number, tenant: string): { all: number; tenant: number } {
    return this.queue.waitingAt(priority, tenant);
  }

  /** Waiting requests per priority band and per tenant (metrics). */
  get shape(): Pick<FairQueue<Waiter>, "bandSizes" | "tenantSizes"> {
    return this.queue;
  }

  /** Forget a tenant's fairness counters (it left the tenant table). */
  forgetTenant(tenant: string): void {
    this.queue.forget(tenant);
    this.shares.forget(tenant);
  }

  enter(ticket: AdmissionTicket): AdmissionRelease | Promise<AdmissionRelease> {
    if (!this.enabled) return noop;
    const tenant = this.tenantOf(ticket);
    if (tenant !== undefined) this.shares.seen(tenant, this.now(), ticket.identity().priority);
    if (this.aheadOfAll(ticket) && this.hasRoom(ticket)) {
      this.active += 1;
      return this.releaser(tenant);
    }
    return this.wait(ticket);
  }

  /**
   * Whether the request would be first in the queue's order: nothing waits, or only lower
   * priorities. Going at once it overtakes nobody, and saves the turn the queue would take to
   * let it go (under a flood's backlog, a turn of a busy event loop).
   */
  private aheadOfAll(ticket: AdmissionTicket): boolean {
    const top = this.queue.topPriority();
    return top === undefined || ticket.identity().priority > top;
  }

  /** Why this request would wait if it came now; null when it would go at once. */
  wouldWait(ticket: AdmissionTicket): WaitCause | null {
    if (!this.enabled) return null;
    if (!this.aheadOfAll(ticket)) return "queue_not_empty";
    const { maxConcurrent } = this.options;
    if (maxConcurrent > 0 && this.active >= maxConcurrent) return "concurrency_limit";
    return this.holdCause(ticket) ?? null;
  }

  /** Refuses every waiting request (shutdown). */
  close(): void {
    for (let next = this.queue.peek(); next !== undefined; next = this.queue.peek()) {
      this.queue.remove(next);
      next.fail(new RouterError("shutting_down"));
    }
    this.stopRecheck();
  }

  private hasRoom(ticket: AdmissionTicket): boolean {
    return !this.atConcurrencyLimit() && !this.saturated(ticket);
  }

  private atConcurrencyLimit(): boolean {
    const { maxConcurrent } = this.options;
    return maxConcurrent > 0 && this.active >= maxConcurrent;
  }

  private saturated(ticket: AdmissionTicket): boolean {
    return this.holdCause(ticket) !== undefined;
  }

  /**
   * Why --queue-when-saturated holds the request now: every candidate saturated (and it outranks
   * nothing there), or no free batch slot on any while tenants share them; or its tenant over
   * its share while only the reserved slots are free.
   */
  private holdCause(ticket: AdmissionTicket): HoldCause {
    if (!this.options.queueWhenSaturated) return undefined;
    const now = this.now();
    const candidates = ticket.candidates();
    if (fleetSaturated(candidates, this.options.thresholds, now)) {
      return this.outranks?.(ticket, now) === true ? undefined : "fleet_saturated";
    }
    const tenant = this.tenantOf(ticket);
    if (tenant === undefined) return undefined;
    const preempted = this.preemptedForOthers(tenant, ticket, candidates, now);
    // Paced: one of its prompts in prefill at a time on a worker (see pacedAtEngine).
    if (preempted && !candidates.some(prefillIdle)) return "tenant_share";
    const paced = preempted ? undefined : this.pacedIntoFreeSlot(tenant, ticket, candidates, now);
    if (paced !== undefined && !candidates.some((w) => bandRoom(w, now))) return paced;
    if (this.shares.heldForOthers(tenant, candidates, now)) {
      return preempted ? undefined : "tenant_share";
    }
    // While tenants share the slots, a request goes only into a free one (the release rule).
    // Where the engines preempt for it, it goes at once: the engine makes the slot.
    if (
      this.options.holdForFreeSlot !== false &&
      this.shares.noFreeSlot(tenant, candidates, now) &&
      !this.enginesPreempt(candidates)
    ) {
      return "fleet_saturated";
    }
    return undefined;
  }

  /**
   * Whether every candidate preempts by priority for a tenant that yields at the engine
   * (--engine-priority, and SGLang said its preemption threshold: priority scheduling on,
   * preemption not disabled).
   */
  private enginesPreempt(candidates: readonly SaturationView[]): boolean {
    return (
      this.engineYields && candidates.every((w) => w.signals.preemptionThreshold !== undefined)
    );
  }

  /**
   * Whether the engines preempt the tenant's work for the other tenants' requests, so no slot
   * needs keeping free for them: with --engine-priority its requests reach the engines past
   * their preemption threshold below the others' of its priority (yieldsAtEngine), and every
   * candidate preempts by priority (SGLang with priority scheduling and preemption on: it said
   * its threshold). A kept slot then only idles: in model time (bench:admission-floor, SGLang's
   * rules) the light tenants' p99 was 43-51 ms preempting alone against 59-64 ms with a slot kept,
   * at 0.980-0.984 of the flood's tokens against 0.961-0.964.
   */
  private preemptedForOthers(
    tenant: string,
    ticket: AdmissionTicket,
    candidates: readonly SaturationView[],
    now: number,
  ): boolean {
    if (!this.enginesPreempt(candidates)) return false;
    return this.shares.yieldsAtEngine(tenant, ticket.identity().priority, candidates, now) === true;
  }

  /**
   * Whether the request's tenant yields at engines that preempt its work for the others
   * (preemptedForOthers), so it goes only to a worker where none of this router's requests waits
   * for its first byte (in the engine's queue or its prefill): the other tenants' request then
   * finds at most one of its prompts in prefill ahead of it. An engine admits waiting prompts
   * up to its prefill token budget a step and runs those steps before any decode (SGLang's
   * `get_next_batch_to_run`), so refilling every slot that a burst of ends freed (a flood's
   * requests that started in one step end in one step) put two or three of its 1,000-token
   * prefill steps ahead of a light request, and its own step shared with another: 100-200 ms at
   * the engine against 12 ms alone (bench:admission's flood/prio, traced per request). One at a
   * time, the next goes at the previous one's first byte, and the freed slots fill one step apart.
   * "prefill-idle" for those; "free-slot" for a request paced below an active band
   * (belowActiveBand) or by the reserve (pacedForReserve): a free slot there too.
   */
  pacedAtEngine(ticket: AdmissionTicket): "prefill-idle" | "free-slot" | undefined {
    const tenant = this.tenantOf(ticket);
    if (tenant === undefined) return undefined;
    const candidates = ticket.candidates();
    const now = this.now();
    if (this.preemptedForOthers(tenant, ticket, candidates, now)) return "prefill-idle";
    return this.pacedIntoFreeSlot(tenant, ticket, candidates, now) === undefined
      ? undefined
      : "free-slot";
  }

  /**
   * Why a request the engines do not preempt for others is paced into a free slot (bandRoom):
   * its tenant is over its share (pacedForReserve), or a band it yields to is active
   * (belowActiveBand); undefined when neither.
   */
  private pacedIntoFreeSlot(
    tenant: string,
    ticket: AdmissionTicket,
    candidates: readonly SaturationView[],
    now: number,
  ): "tenant_share" | "priority_paced" | undefined {
    if (this.pacedForReserve(tenant, candidates, now)) return "tenant_share";
    return this.belowActiveBand(ticket, candidates, now) ? "priority_paced" : undefined;
  }

  /**
   * Whether the reserve paces the tenant (--tenant-reserve-pace): it holds at least its share
   * while others are active (TenantShares.overShare). Where the engines do not preempt its work,
   * the kept slot alone left a light request behind the prompts refilled into a burst of ends,
   * prefilled first come, first served ahead of it (SGLang's PrefillAdder, schedule_policy.py;
   * vLLM v1 schedules the running requests' prefill chunks before a waiting one): traced in
   * bench:admission's flood/on, the slowest light requests, never held, got their first token
   * 94-148 ms after 3-5 of the flood's prompts went to their worker, against 12 ms alone.
   */
  private pacedForReserve(
    tenant: string,
    candidates: readonly SaturationView[],
    now: number,
  ): boolean {
    return this.options.reservePace !== false && this.shares.overShare(tenant, candidates, now);
  }

  /**
   * Whether the engines preempt the request's work for a priority band active now, whatever the
   * tenants (a tenant's own flood at -1 under its requests at 10). It is then paced, and only
   * into a free batch slot (bandRoom): a request of that band finds at most one prompt of this
   * router's in prefill ahead of it, begun when it was sent (none waits in the engine's queue to
   * start at a moment the router cannot see, or to join its step), so the prefill still under way
   * is known and the band's request goes where it ends first (scheduling/prefix-cost.ts). In
   * model time (bench:admission-floor's fleet rows) the two together, not either alone, lower
   * the band's p99 TTFT.
   */
  private belowActiveBand(
    ticket: AdmissionTicket,
    candidates: readonly SaturationView[],
    now: number,
  ): boolean {
    if (!this.enginesPreempt(candidates)) return false;
    return this.shares.bandAbove(ticket.identity().priority, yieldDepth(candidates) - 1, now);
  }

  /**
   * Whether the request's tenant shares the slots with other active tenants while the reserve
   * rule is on (its first attempt then looks for a free slot first: admission.ts roomFor).
   */
  sharingSlots(ticket: AdmissionTicket): boolean {
    const tenant = this.tenantOf(ticket);
    if (tenant === undefined || this.shares.reserve === 0) return false;
    return this.shares.othersActive(tenant, this.now()) > 0;
  }

  /**
   * Whether the request's engine priority goes below the other tenants' of its priority
   * (--engine-priority: TenantShares.yieldsAtEngine); undefined when the shares are not counted
   * (without --queue-when-saturated) or a candidate's batch cap is unknown.
   */
  yieldsAtEngine(ticket: AdmissionTicket): boolean | undefined {
    const tenant = this.tenantOf(ticket);
    if (tenant === undefined) return undefined;
    const { priority } = ticket.identity();
    return this.shares.yieldsAtEngine(tenant, priority, ticket.candidates(), this.now());
  }

  /** Whether the request's tenant already sends its priority lower, with some in flight. */
  yieldingAt(ticket: AdmissionTicket): boolean {
    const tenant = this.tenantOf(ticket);
    return tenant !== undefined && this.shares.yieldingAt(tenant, ticket.identity().priority);
  }

  /** The admitted request went to its engine below the others (see yieldsAtEngine). */
  yielded(ticket: AdmissionTicket): void {
    const tenant = this.tenantOf(ticket);
    if (tenant !== undefined) this.shares.yielding(tenant, ticket.identity().priority);
  }

  /** The tenant whose share is counted (with --queue-when-saturated); undefined otherwise. */
  private tenantOf(ticket: AdmissionTicket): string | undefined {
    return this.options.queueWhenSaturated ? ticket.identity().tenant : undefined;
  }

  private wait(ticket: AdmissionTicket): Promise<AdmissionRelease> {
    const identity = ticket.identity();
    return new Promise<AdmissionRelease>((resolve, reject) => {
      const onAbort = () => waiter.fail(new ClientGoneError());
      const settle = () => {
        waiter.settled = true;
        if (waiter.counted) {
          waiter.counted = false;
          this.shares.queued(identity.tenant, -1);
        }
        clearTimeout(waiter.timer);
        ticket.signal.off("abort", onAbort);
        this.queue.remove(waiter);
        if (this.queue.size === 0) this.stopRecheck();
      };
      const waiter: Waiter = new Waiter(
        ticket,
        identity,
        ticket.cost(),
        this.now(),
        (release) => {
          if (waiter.settled) return release();
          settle();
          resolve(release);
        },
        (err) => {
          if (waiter.settled) return;
          settle();
          reject(err);
        },
      );
      const refusal = this.makeRoomFor(waiter);
      if (refusal !== undefined) {
        this.observer?.refused(identity, refusal.reason);
        reject(refusal.error);
        return;
      }
      const timeoutMs = ticket.timeoutMs();
      waiter.timer = setTimeout(() => {
        this.observer?.refused(identity, "queue_timeout");
        waiter.fail(
          this.refusal(
            "queue_timeout",
            `Request waited ${Math.round(timeoutMs)} ms in the router's queue (the fleet is saturated or at --max-concurrent-requests); retry later.`,
          ),
        );
      }, timeoutMs);
      ticket.signal.once("abort", onAbort);
      this.queue.push(waiter);
      if (this.tenantOf(ticket) !== undefined) {
        waiter.counted = true;
        this.shares.queued(identity.tenant, 1);
      }
      this.startRecheck();
      // The request may have found room after all (it waited only for those ahead of it).
      this.schedulePump();
    });
  }

  /**
   * Makes a place for the newcomer within both bounds, shedding a lower-priority (or, in the same
   * band, a heavier tenant's) waiting request when that is fairer; else says why the newcomer goes.
   */
  private makeRoomFor(waiter: Waiter): { reason: RefusalReason; error: RouterError } | undefined {
    const { queueSize, maxQueuedPerTenant } = this.options;
    if (queueSize === 0) {
      return { reason: "too_many_requests", error: this.full("--queue-size is 0") };
    }
    if (this.queue.queuedFor(waiter.tenant) >= maxQueuedPerTenant) {
      const victim = this.queue.tenantVictimFor(waiter);
      if (victim === undefined) {
        const error = this.refusal(
          "too_many_requests",
          `Tenant ${waiter.tenant} has ${maxQueuedPerTenant} requests waiting (--max-queued-per-tenant); retry later.`,
        );
        return { reason: "tenant_queue_full", error };
      }
      this.shed(victim);
    }
    if (this.queue.size >= queueSize) {
      const victim = this.queue.victimFor(waiter);
      if (victim === undefined) {
        return { reason: "too_many_requests", error: this.full(`${queueSize} waiting`) };
      }
      this.shed(victim);
    }
    return undefined;
  }

  private shed(victim: Waiter): void {
    this.observer?.refused(victim.identity, "shed");
    victim.fail(
      this.refusal(
        "too_many_requests",
        "The router's queue is full and this request had the lowest priority (or its tenant the largest share); retry later.",
      ),
    );
  }

  private full(detail: string): RouterError {
    return this.refusal("too_many_requests", `Router is at capacity (${detail}); retry later.`);
  }

  private refusal(code: "too_many_requests" | "queue_timeout", message: string): RouterError {
    // The mean wait says when a slot is likely; a minute at most, however long the waits were.
    return new RouterError(code, message, retryAfterSecs(this.meanWaitMs, 60));
  }

  private releaser(tenant: string | undefined): AdmissionRelease {
    if (tenant !== undefined) this.shares.started(tenant);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active -= 1;
      if (tenant !== undefined) this.shares.ended(tenant);
      if (this.queue.size > 0) this.schedulePump();
    };
  }

  /**
   * A worker's prompts in prefill are all done: a request paced at the engines may go there now,
   * not at the next release or recheck (up to recheckMs later).
   */
  prefillIdled(): void {
    if (this.queue.size > 0) this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(this.pump);
  }

  /** Lets the next waiting request go if there is room for it; one a turn (see the class note). */
  private readonly pump = (): void => {
    this.pumpScheduled = false;
    const head = this.queue.peek();
    if (head === undefined || this.atConcurrencyLimit()) return;
    // One answer per tenant, priority and model this turn: nothing changes until the one grant,
    // and a flood's backlog is hundreds of such requests (judging each alone, the scan below
    // took a fifth of the router's CPU under bench:admission's flood, delaying every answer).
    const causes = new Map<string, HoldCause>();
    const causeOf = (w: Waiter): HoldCause => {
      const room = w.ticket.roomKey;
      if (room === undefined) return this.holdCause(w.ticket);
      const key = `${w.tenant}\u0000${w.priority}\u0000${room}`;
      if (causes.has(key)) return causes.get(key);
      const cause = this.holdCause(w.ticket);
      causes.set(key, cause);
      return cause;
    };
    // Room is per request (its model's workers): a head whose workers are saturated does not hold
    // back a request whose workers have room (the head, first in find's order, was just asked).
    const headCause = causeOf(head);
    // A tenant held for its share is held for every request of this turn (its other requests
    // would each count the same slots again).
    const sharing = new Set<string>(headCause === "tenant_share" ? [head.tenant] : []);
    const ready = (w: Waiter) => {
      if (w === head || sharing.has(w.tenant)) return false;
      const cause = causeOf(w);
      if (cause === "tenant_share") sharing.add(w.tenant);
      return cause === undefined;
    };
    const next = headCause === undefined ? head : this.queue.find(ready, MAX_SCAN);
    if (next === undefined) return;
    this.queue.take(next);
    this.active += 1;
    const waited = this.now() - next.enqueuedAt;
    this.meanWaitMs += (waited - this.meanWaitMs) / 8;
    this.observer?.granted(next.identity, waited);
    next.grant(this.releaser(this.tenantOf(next.ticket)));
    if (this.queue.size > 0) this.schedulePump();
  };

  private startRecheck(): void {
    if (this.recheck !== undefined || !this.options.queueWhenSaturated) return;
    this.recheck = setInterval(() => this.schedulePump(), this.options.recheckMs ?? 20);
    this.recheck.unref();
  }

  private stopRecheck(): void {
    if (this.recheck === undefined) return;
    clearInterval(this.recheck);
    this.recheck = undefined;
  }
}

function noop(): void {}

/**
 * No request of this router there waits for its first byte (admission paces a yielding tenant).
 * Only those whose first byte the router sees as it comes count: a non-streaming answer, or one
 * relayed by nginx, shows it at its end, and counting those would hold a paced tenant until
 * its answers end, at its share of the slots with the rest idle.
 */
export function prefillIdle(worker: SaturationView): boolean {
  return (worker.visiblePrefillRequests ?? worker.pendingPrefillRequests) === 0;
}

/**
 * Where a request paced for a band above it may go: prefill idle, and a free batch slot when the
 * cap is known, so that it starts at the engine's next step (belowActiveBand).
 */
export function bandRoom(worker: SaturationView, now: number): boolean {
  return prefillIdle(worker) && (freeSlots(worker, now) ?? 1) > 0;
}
