/**
 * Tells when a KV-event publisher floods the router (issue 20: 200k events/s for 10 s wedged it),
 * so that its stream is shed instead of queued: the router has been behind the publisher, a
 * message waiting in ZMQ after every one handled, for MAX_BEHIND_MS without a pause. An engine
 * publishes one batch per step and the router applies one in well under a millisecond, so being
 * behind that long is a flood, not a burst.
 *
 * Once flooded, the stream is held for SHED_HOLD_MS: its messages are read and dropped undecoded
 * (a few microseconds each), so a flood that goes on costs the router almost nothing and cannot
 * keep it busy; then it is applied again, and shed again if the flood has not stopped.
 */
export const MAX_BEHIND_MS = 500;
export const SHED_HOLD_MS = 10_000;

export class FloodGuard {
  /** Since when a message has been waiting after every one handled; undefined when caught up. */
  private behindSince: number | undefined;
  private holdUntil = 0;

  constructor(private readonly now: () => number) {}

  /** After a message was handled: whether the router has now been behind for too long. */
  flooded(messageWaiting: boolean): boolean {
    if (!messageWaiting) {
      this.behindSince = undefined;
      return false;
    }
    const now = this.now();
    this.behindSince ??= now;
    return now - this.behindSince >= MAX_BEHIND_MS;
  }

  /** Starts a hold; answers when it ends. */
  hold(): number {
    this.behindSince = undefined;
    this.holdUntil = this.now() + SHED_HOLD_MS;
    return this.holdUntil;
  }

  /** Whether messages are being dropped unread now. */
  get holding(): boolean {
    return this.now() < this.holdUntil;
  }
}
