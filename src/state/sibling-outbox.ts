import type { SiblingMessage } from "./sibling-messages.js";

/**
 * Messages written to one end of radixgate-cluster's local channel and not yet taken by the
 * pipe, past which decision batches and load counts are dropped: Node buffers what `send` is
 * given without limit, so a process that stalls (or a primary that does) would otherwise make
 * its peer's memory grow with every decision. 1,024 batches of at most 256 decisions, a few MB
 * at worst; a healthy process takes them in well under a millisecond, so the bound is only
 * reached by a stalled one.
 */
export const SIBLING_OUTBOX_LIMIT = 1024;

/** Only hints are dropped: a lost decision costs hit rate, never correctness. */
const droppable = (message: SiblingMessage) => message.t === "ops" || message.t === "load";

export interface SiblingOutboxEvents {
  /** The first drop of a backlog (log once per stall). */
  onStall?: () => void;
  /** The backlog is written out after `dropped` messages were dropped: the peer may resync. */
  onDrained?: (dropped: number) => void;
}

/**
 * One end of the channel with a bound on its backlog. `write` sends a message and calls `done`
 * once the pipe took it (node:cluster's `send` callback, called on success and on a closed
 * channel alike). Membership, claims, replay and the rest are never dropped.
 */
export class SiblingOutbox {
  /** Messages given to `write` and not yet taken. */
  private pending = 0;
  /** Dropped since the backlog last drained. */
  private droppedNow = 0;
  /** Dropped since the outbox was made. */
  dropped = 0;

  constructor(
    private readonly write: (message: SiblingMessage, done: () => void) => boolean,
    private readonly events: SiblingOutboxEvents = {},
    private readonly limit = SIBLING_OUTBOX_LIMIT,
  ) {}

  /** Sends `message`; false when it was dropped (backlog full) or the channel is closed. */
  send(message: SiblingMessage): boolean {
    if (this.pending >= this.limit && droppable(message)) {
      this.dropped += 1;
      this.droppedNow += 1;
      if (this.droppedNow === 1) this.events.onStall?.();
      return false;
    }
    this.pending += 1;
    let done = false;
    const written = this.write(message, () => {
      if (done) return;
      done = true;
      this.pending -= 1;
      if (this.pending === 0 && this.droppedNow > 0) {
        const n = this.droppedNow;
        this.droppedNow = 0;
        this.events.onDrained?.(n);
      }
    });
    return written;
  }

  /** Messages waiting to be taken by the pipe. */
  get backlog(): number {
    return this.pending;
  }
}
