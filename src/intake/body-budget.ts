import { RouterError } from "../errors.js";

/**
 * One memory budget for every request body buffered at once (--max-body-buffer-bytes). A body is
 * held from its first byte until its request ends (a retry sends it again), so the budget bounds
 * the router's body memory whatever the number of clients. Bytes are reserved as they arrive, or
 * all at once from Content-Length, so a body that cannot fit is refused before it is read.
 */
export class BodyBudget {
  private used = 0;

  /** `maxBytes` 0 = no budget. */
  constructor(readonly maxBytes: number) {}

  get inUse(): number {
    return this.used;
  }

  /** A lease for one request; release it when the request ends. */
  lease(): BodyLease {
    return new BodyLease(this);
  }

  /** @internal */
  tryTake(bytes: number): boolean {
    if (this.maxBytes > 0 && this.used + bytes > this.maxBytes) return false;
    this.used += bytes;
    return true;
  }

  /** @internal */
  give(bytes: number): void {
    this.used -= bytes;
  }
}

/** What one request holds of the budget; grows with its body, released once. */
export class BodyLease {
  private held = 0;
  private released = false;

  constructor(private readonly budget: BodyBudget) {}

  /** Makes the lease cover `total` bytes; throws body_buffer_full when the budget cannot. */
  cover(total: number): void {
    if (this.released || total <= this.held) return;
    if (!this.budget.tryTake(total - this.held)) {
      throw new RouterError(
        "body_buffer_full",
        `The router is buffering its limit of request bodies (--max-body-buffer-bytes ${this.budget.maxBytes}); retry shortly.`,
      );
    }
    this.held = total;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.held);
    this.held = 0;
  }
}
