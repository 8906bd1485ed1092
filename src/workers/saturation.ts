import type { LoadSignals } from "../workers/signals.js";

/** When one worker counts as saturated (--saturation-queue-depth, -kv-usage, -pending-prefill-chars). */
export interface SaturationThresholds {
  /** Estimated engine waiting queue, requests. */
  queueDepth: number;
  /** KV-cache usage, 0..1 (1 = never). */
  kvUsage: number;
  /** This router's uncached prompt characters there without a first byte (0 = never). */
  pendingPrefillChars: number;
}

/** Why a worker counts as saturated; the metric label and /debug/route's word. */
export type SaturationReason = "engine_queue" | "kv_usage" | "pending_prefill";

/** What saturation reads of a worker (a Worker is one). */
export interface SaturationView {
  readonly id: string;
  /** A side of prefill/decode disaggregation, or "regular" (a Worker's; absent in some fakes). */
  readonly role?: { readonly type: string };
  /** This router's requests there without a first byte yet, and their uncached characters. */
  readonly pendingPrefillRequests: number;
  readonly pendingPrefillChars: number;
  /**
   * Those requests whose first byte the router sees as the engine sends it (streams it relays
   * itself: a Worker's; absent in some fakes, where all of them count).
   */
  readonly visiblePrefillRequests?: number;
  /** This router's requests there, dispatched and not ended (a Worker's; absent in some fakes). */
  readonly ownInFlight?: number;
  /**
   * This router's requests there that the engine got with a priority below `priority`
   * (--engine-priority; a Worker's tally, workers/priority-tally.ts; absent in some fakes).
   */
  ownInFlightBelow?(priority: number): number;
  /** The lowest engine priority of this router's requests there (a Worker's; absent in fakes). */
  lowestEnginePriority?(): number | undefined;
  /** The engine's last reading, undefined when stale (never trusted then) or never read. */
  readonly signals: {
    load(now: number): LoadSignals | undefined;
    /** The running cap the engine said it has (SGLang /get_server_info), when it did. */
    readonly maxRunning?: number | undefined;
    /** SGLang's --priority-scheduling-preemption-threshold, when /get_server_info said it. */
    readonly preemptionThreshold?: number | undefined;
  };
}

/** One worker's saturation as /debug/route and the metrics show it. */
export interface WorkerSaturation {
  readonly worker: string;
  readonly saturated: boolean;
  readonly reason: SaturationReason | null;
  /** The engine queue as estimated now; null without a fresh reading. */
  readonly estimatedQueue: number | null;
  readonly kvUsage: number | null;
  readonly pendingPrefillChars: number;
}

/**
 * Each engine's running-batch size as seen full: its `running` at a fresh reading that also
 * showed a waiting queue (an engine queues when its batch is full, by slots or by KV). Kept per
 * signals object, so it goes with its worker.
 *
 * A queue does not always mean a full batch: requests that arrive between two of the engine's
 * steps wait until the next step admits them, so a reading taken while a burst of ends is being
 * refilled shows a queue next to a half-empty batch (issue 24's bench: `queued 1, running 3` on
 * a batch of 8). Learned from that, the batch would be too small and could never be corrected:
 * the router would keep the engine at 3 or 4 running, so no reading would show it full again
 * (throughput halved). So a larger batch is learned at once, a smaller one only when
 * BATCH_CONFIRMATIONS readings in a row show a queue beside it (the engine's batch did shrink:
 * KV-bound, or restarted smaller).
 */
interface BatchMemory {
  size: number;
  /** The reading last applied (each is applied once, however often the estimate is read). */
  reading: LoadSignals;
  /** Readings in a row that showed a queue beside a smaller batch, and the largest of those. */
  smaller: number;
  smallerMost: number;
}

const fullBatch = new WeakMap<object, BatchMemory>();
const BATCH_CONFIRMATIONS = 3;

type BatchSource = SaturationView["signals"];

/**
 * The engine's full-batch size after this reading (see BatchMemory); before any reading showed
 * it full, the running cap the engine said it has (SGLang's /get_server_info; else undefined).
 * Without that cap, a flood's first burst reaches the engine before a reading shows its queue
 * (issue 24's bench: about 20 requests queued at each engine, which every request held behind
 * them waited out, over a second).
 */
function learnBatch(signals: BatchSource, load: LoadSignals): number | undefined {
  let memory = fullBatch.get(signals);
  if (memory?.reading === load) return memory.size;
  const running = load.running ?? 0;
  const full = (load.queued ?? 0) > 0 && running > 0;
  if (memory === undefined) {
    // A said cap is where the batch starts (a reading below it counts toward shrinking it).
    const size = signals.maxRunning ?? (full ? running : undefined);
    if (size === undefined) return undefined;
    memory = { size, reading: load, smaller: 0, smallerMost: 0 };
    fullBatch.set(signals, memory);
  }
  memory.reading = load;
  if (full && running < memory.size && !ownArrivals(load)) {
    memory.smaller += 1;
    memory.smallerMost = Math.max(memory.smallerMost, running);
    if (memory.smaller >= BATCH_CONFIRMATIONS) memory.size = memory.smallerMost;
    else return memory.size;
  } else if (full && running > memory.size) {
    memory.size = running;
  }
  memory.smaller = 0;
  memory.smallerMost = 0;
  return memory.size;
}

/**
 * Whether the reading's queue beside a batch below the one known could be only this router's own
 * requests, sent and without a first byte yet: the engine takes them in over its next steps (a
 * step admits prompts up to its prefill token budget: SGLang's --chunked-prefill-size, vLLM's
 * --max-num-batched-tokens, so a 2048-token step takes two 1,000-token prompts), not into a smaller
 * batch. Such a reading never counts toward shrinking the batch: learned from a flood's ramp (8
 * sent at once, seen as running 3-5 with the rest queued) the batch shrank from the 8 SGLang said
 * to 5, the release rule then never sent the engine more, so no reading could show it full again
 * (bench:admission: one engine of two left with 3 slots idle for the whole run). An engine whose
 * batch KV memory bounds is seen by its KV usage (--saturation-kv-usage) instead.
 */
function ownArrivals(load: LoadSignals): boolean {
  return load.routerPending !== undefined && (load.queued ?? 0) <= load.routerPending;
}

/**
 * Called after every read of a worker's engine: a reading that shows a queue tells how many
 * requests the engine runs when full (kept for estimatedQueue), even if no request asks then.
 */
export function noteEngineReading(worker: SaturationView, now = Date.now()): void {
  estimatedQueue(worker, now);
}

/**
 * The engine's waiting queue now, estimated from its last fresh reading and what this router did
 * since. The reading alone is up to a poll interval old; this router's count of its requests there
 * is exact and live (each dispatch joins the engine, each end leaves it: changeSinceReading), and
 * its change since the reading is the change in what the engine holds for this router (counted from the smaller of the counts at the read's start and end, since the
 * engine's snapshot falls in between: a read that spans a burst errs toward a longer queue). That change fills the engine's free batch
 * slots first: those of the batch as seen full (learnBatch). Until an engine has
 * been seen full the free slots are unknown and the reading's queue stands alone (a burst reaches
 * the engine until the next reading shows its queue). Requests in prefill count as queued, which
 * errs on the side of holding back. A stale reading is never trusted: without a fresh one, only
 * this router's live count beyond the engine's full batch (a lower bound), or undefined when the
 * batch is not known either.
 */
export function estimatedQueue(worker: SaturationView, now: number): number | undefined {
  const backlog = engineBacklog(worker, now);
  return backlog === undefined ? undefined : Math.max(0, backlog);
}

/**
 * What the engine holds beyond its full batch, as estimatedQueue counts it but not clamped at 0:
 * a negative backlog is free batch slots (-1 also when the engine was never seen full and its
 * reading shows no queue: free slots unknown, counted as room). Undefined as estimatedQueue.
 */
function engineBacklog(worker: SaturationView, now: number): number | undefined {
  const load = worker.signals.load(now);
  if (load?.queued === undefined) {
    const slots = freeSlots(worker, now);
    return slots === undefined ? undefined : -slots;
  }
  const batch = learnBatch(worker.signals, load);
  if (batch === undefined) return load.queued > 0 ? load.queued : -1;
  return -slotsFree(worker, load, batch);
}

/**
 * The worker's free batch slots now: its batch cap (the engine's batch as seen full, else the cap
 * the operator or SGLang's /get_server_info said) minus what the engine holds. What it holds is
 * this router's requests there (counted exactly: +1 at dispatch, -1 at the end of the attempt,
 * whatever ends it: completion, error, client disconnect) plus, from the last fresh reading,
 * the others' work (the reading's running and queued beyond this router's requests at the
 * read: another replica's, clients that bypass the router). Negative: requests waiting in the
 * engine's queue. Without a fresh reading, this router's requests alone (the others' unseen:
 * free slots at most). Undefined while the cap is unknown (vLLM says none until a reading shows
 * the engine full, or --worker-max-running).
 */
export function freeSlots(worker: SaturationView, now: number): number | undefined {
  const load = worker.signals.load(now);
  if (load?.queued === undefined) {
    const batch = fullBatchOf(worker);
    if (batch === undefined) return undefined;
    // Every request of this router there is running or queued; a fake without the count: those
    // without a first byte (a lower bound).
    return batch - (worker.ownInFlight ?? worker.pendingPrefillRequests);
  }
  const batch = learnBatch(worker.signals, load);
  return batch === undefined ? undefined : slotsFree(worker, load, batch);
}

/** Free slots of a batch of `batch` after a fresh reading: see freeSlots. */
function slotsFree(worker: SaturationView, load: LoadSignals, batch: number): number {
  const engineHeld = (load.queued ?? 0) + (load.running ?? batch);
  const ownAtRead = load.routerInFlightMost ?? load.routerInFlightLeast;
  if (worker.ownInFlight !== undefined && ownAtRead !== undefined) {
    // The others' work as the reading saw it, never below 0: a request of this router still on
    // its way to the engine when it answered is not work the others freed. Counted from the most
    // of this router's requests during the read: from the least, one that ended (or was
    // dispatched) while the engine answered stood as the others' work until the next reading, a
    // slot the release rule kept empty with a light request held for it.
    const others = Math.max(0, engineHeld - ownAtRead);
    return batch - worker.ownInFlight - others;
  }
  return batch - engineHeld - changeSinceReading(worker, load);
}

/**
 * How many more requests of this router the engine holds now than at its last reading, for
 * readings (and fakes) without the in-flight count: from requests without a first byte, which
 * sees an end only when the next request starts.
 */
function changeSinceReading(worker: SaturationView, load: LoadSignals): number {
  const atReading = load.routerPendingLeast ?? load.routerPending ?? 0;
  return worker.pendingPrefillRequests - atReading;
}

/**
 * Why the worker is saturated now, or undefined when it is not. A worker without fresh engine
 * readings is judged only by the router's own live figures (its requests there beyond the
 * engine's batch as last seen full, its pending prefill characters); one that exposes nothing is
 * never saturated unless --saturation-pending-prefill-chars says so, and routes as before.
 */
export function saturationReason(
  worker: SaturationView,
  thresholds: SaturationThresholds,
  now: number,
): SaturationReason | undefined {
  const pending = thresholds.pendingPrefillChars;
  if (pending > 0 && worker.pendingPrefillChars >= pending) return "pending_prefill";
  // Depth 0: saturated once the batch is full (counting this router's requests since the
  // reading), so a request let go takes a free slot and never waits in the engine's queue.
  return engineSaturation(worker.signals.load(now), thresholds, engineBacklog(worker, now));
}

/**
 * The engine's side of saturation, the one rule for admission and the scheduling profiles'
 * saturation filter: its queue at or over `queueDepth`, or its fresh KV usage at `kvUsage` (never
 * with 1). Admission passes the queue as it estimates it now (engineBacklog); the filter, GIE's
 * utilization detector, the engine's own last report.
 */
export function engineSaturation(
  load: LoadSignals | undefined,
  thresholds: Pick<SaturationThresholds, "queueDepth" | "kvUsage">,
  queue: number | undefined,
): "engine_queue" | "kv_usage" | undefined {
  if (queue !== undefined && queue >= thresholds.queueDepth) return "engine_queue";
  const kvUsage = load?.kvUsage;
  if (kvUsage !== undefined && thresholds.kvUsage < 1 && kvUsage >= thresholds.kvUsage) {
    return "kv_usage";
  }
  return undefined;
}

/** Whether the engine's fresh KV usage is at --saturation-kv-usage (never with 1). */
export function kvSaturated(
  worker: SaturationView,
  thresholds: SaturationThresholds,
  now: number,
): boolean {
  return engineSaturation(worker.signals.load(now), thresholds, undefined) === "kv_usage";
}

/** The engine's running batch as seen full (see BatchMemory), else its said cap; or undefined. */
export function fullBatchOf(worker: SaturationView): number | undefined {
  return fullBatch.get(worker.signals)?.size ?? worker.signals.maxRunning;
}

/**
 * The fleet is saturated for a request when every candidate for it is; no candidate at all is not
 * saturation (the forwarder answers that: 503 or 404). Stops at the first worker with room, so
 * a fleet with room costs one check.
 */
export function fleetSaturated(
  candidates: readonly SaturationView[],
  thresholds: SaturationThresholds,
  now: number,
): boolean {
  if (candidates.length === 0) return false;
  const sides = pairSides(candidates);
  if (sides !== undefined) {
    return sides.some((side) => side.length > 0 && everySaturated(side, thresholds, now));
  }
  return everySaturated(candidates, thresholds, now);
}

/** Whether every one of these workers is saturated; stops at the first with room. */
function everySaturated(
  workers: readonly SaturationView[],
  thresholds: SaturationThresholds,
  now: number,
): boolean {
  for (const worker of workers) {
    if (saturationReason(worker, thresholds, now) === undefined) return false;
  }
  return true;
}

/**
 * A disaggregated fleet's candidates (all prefill or decode workers) by side; undefined for a
 * regular fleet. A request needs a worker of each side, so the fleet is saturated for it when
 * either side is, and it has room only where both have.
 */
export function pairSides(
  candidates: readonly SaturationView[],
): [prefill: SaturationView[], decode: SaturationView[]] | undefined {
  const role = candidates[0]?.role?.type;
  if (role !== "prefill" && role !== "decode") return undefined;
  const prefill: SaturationView[] = [];
  const decode: SaturationView[] = [];
  for (const worker of candidates)
    (worker.role?.type === "prefill" ? prefill : decode).push(worker);
  return [prefill, decode];
}

/** Every candidate's saturation in full (for /debug/route and GET /workers, not the hot path). */
export function describeSaturation(
  worker: SaturationView,
  thresholds: SaturationThresholds,
  now: number,
): WorkerSaturation {
  const reason = saturationReason(worker, thresholds, now);
  return {
    worker: worker.id,
    saturated: reason !== undefined,
    reason: reason ?? null,
    estimatedQueue: estimatedQueue(worker, now) ?? null,
    kvUsage: worker.signals.load(now)?.kvUsage ?? null,
    pendingPrefillChars: worker.pendingPrefillChars,
  };
}
