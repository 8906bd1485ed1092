/**
 * Applies one worker's KV-event batches to the precise index in slices, in order, a bounded amount
 * of work per event-loop turn (TurnBudget), and holds at most `maxPendingBlocks` blocks waiting.
 *
 * - A slice is at most SLICE_BLOCKS blocks; an event bigger than that is applied in pieces (a
 *   BlockStored's pieces chained by parent hash, as the engine would have sent them), so one
 *   batch of 400k blocks is some 400 slices spread over turns, not one 6-second stall (issue 20).
 * - Bounded: a batch that would take the backlog past its bound is refused (`push` answers false)
 *   and the caller sheds the stream: a publisher faster than the router can apply is not queued
 *   without limit. The bound is in blocks, the unit of both the work and the memory.
 */
import type { BlockRemoved, BlockStored, KvEvent } from "../index/block-events.js";
import { HashList } from "../index/hash-list.js";
import type { TurnBudget } from "./turn-budget.js";

export interface EventApplierOptions {
  budget: TurnBudget;
  /** Most blocks waiting to be applied (one batch is always taken when nothing waits). */
  maxPendingBlocks: number;
  /** Applies one event, or one piece of a big one; `first` is false for the pieces after the first. */
  apply(event: KvEvent, first: boolean): void;
  /** After each slice (metrics are counted per slice, not per event). */
  sliceDone?(): void;
}

/** Blocks applied between two looks at the turn budget: a few milliseconds of work. */
export const SLICE_BLOCKS = 1024;
/** Blocks waiting below which the stream may hand over its next batch (`caughtUp`). */
const LOW_WATER_BLOCKS = 4 * SLICE_BLOCKS;

export class EventApplier {
  /** Batches waiting, oldest first, from `head` on. */
  private batches: (readonly KvEvent[])[] = [];
  private head = 0;
  /** Position in the head batch: its next event, and the next block of that event. */
  private event = 0;
  private offset = 0;
  private pending = 0;
  private draining = false;
  /** Waiting for the backlog to fall below LOW_WATER_BLOCKS. */
  private waiters: (() => void)[] = [];

  constructor(private readonly options: EventApplierOptions) {}

  /** Blocks waiting to be applied. */
  get pendingBlocks(): number {
    return this.pending;
  }

  /** Queues a batch's events; false (nothing queued) when they would pass the backlog's bound. */
  push(events: readonly KvEvent[]): boolean {
    let weight = 0;
    for (const e of events) weight += weightOf(e);
    if (this.pending > 0 && this.pending + weight > this.options.maxPendingBlocks) return false;
    this.batches.push(events);
    this.pending += weight;
    if (!this.draining) void this.drain();
    return true;
  }

  /**
   * Resolves once few blocks wait: the stream reads its next message only then, so that a backlog
   * stays in ZMQ's queue (bytes, outside the heap, where the subscriber sees it and sheds it)
   * rather than here as decoded objects.
   */
  caughtUp(): Promise<void> | undefined {
    if (this.pending <= LOW_WATER_BLOCKS) return undefined;
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Forgets every batch waiting (the stream was reset or shed); answers how many there were. */
  drop(): number {
    const dropped = this.batches.length - this.head;
    this.batches = [];
    this.head = 0;
    this.event = 0;
    this.offset = 0;
    this.pending = 0;
    this.wake();
    return dropped;
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.head < this.batches.length) {
        await this.options.budget.take();
        this.applySlice();
        this.options.sliceDone?.();
        if (this.pending <= LOW_WATER_BLOCKS) this.wake();
      }
    } finally {
      this.draining = false;
    }
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }

  private applySlice(): void {
    let room = SLICE_BLOCKS;
    while (room > 0 && this.head < this.batches.length) {
      const events = this.batches[this.head]!;
      const event = events[this.event];
      if (event === undefined) {
        this.nextBatch();
        continue;
      }
      const blocks = divisibleBlocks(event);
      if (blocks === 0 || event.type === "AllBlocksCleared") {
        this.options.apply(event, true);
        this.done(weightOf(event));
        room -= weightOf(event);
        continue;
      }
      const from = this.offset;
      const to = Math.min(blocks, from + room);
      this.options.apply(
        from === 0 && to === blocks ? event : pieceOf(event, from, to),
        from === 0,
      );
      this.pending -= to - from;
      room -= to - from;
      if (to === blocks) this.done(0);
      else this.offset = to;
    }
  }

  /** The current event is applied: on to the next one. */
  private done(weight: number): void {
    this.pending -= weight;
    this.event++;
    this.offset = 0;
  }

  private nextBatch(): void {
    this.head++;
    this.event = 0;
    this.offset = 0;
    // Drop the applied part now and then, not on every batch (shift is O(n)).
    if (this.head >= 1024 && this.head * 2 >= this.batches.length) {
      this.batches = this.batches.slice(this.head);
      this.head = 0;
    }
  }
}

/** Blocks an event stands for, in the bound and the slices (an empty event costs one). */
function weightOf(event: KvEvent): number {
  return event.type === "AllBlocksCleared" ? 1 : Math.max(1, event.blockHashes.length);
}

/**
 * Blocks of an event that can be cut into pieces: its hashes, for a BlockRemoved or a well-formed
 * BlockStored (a malformed one goes whole, to be counted as such); 0 for anything else.
 */
function divisibleBlocks(event: KvEvent): number {
  if (event.type === "BlockRemoved") return event.blockHashes.length;
  if (event.type !== "BlockStored") return 0;
  const n = event.blockHashes.length;
  return event.tokenIds.length === n * event.blockSize ? n : 0;
}

/** Blocks [from, to) of the event; a BlockStored piece's parent is the block before it. */
function pieceOf(event: BlockStored | BlockRemoved, from: number, to: number): KvEvent {
  const all = event.blockHashes;
  const blockHashes = all.slice(from, to);
  if (event.type === "BlockRemoved") return { ...event, blockHashes };
  return {
    ...event,
    blockHashes,
    parentHash:
      from === 0 ? event.parentHash : all instanceof HashList ? all.at(from - 1) : all[from - 1]!,
    tokenIds: event.tokenIds.slice(from * event.blockSize, to * event.blockSize),
    ...(event.mediaKeys != null && { mediaKeys: event.mediaKeys.slice(from, to) }),
  };
}
