/**
 * A first-in first-out queue with a fixed capacity that drops its oldest item to make room, so a
 * replica that cannot publish (Redis slow or down) keeps its newest updates and bounded memory.
 */
export class BoundedQueue<T> {
  private readonly items: (T | undefined)[];
  private head = 0;
  private count = 0;
  /** Items dropped to make room since the queue was made. */
  dropped = 0;

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError(`queue capacity must be an integer >= 1, got ${capacity}`);
    this.items = new Array<T | undefined>(capacity);
  }

  get size(): number {
    return this.count;
  }

  /** Adds an item; returns false when the oldest item was dropped for it. */
  push(item: T): boolean {
    const tail = (this.head + this.count) % this.capacity;
    this.items[tail] = item;
    if (this.count < this.capacity) {
      this.count += 1;
      return true;
    }
    this.head = (this.head + 1) % this.capacity;
    this.dropped += 1;
    return false;
  }

  /** Removes and returns up to `max` oldest items. */
  take(max: number): T[] {
    const n = Math.min(max, this.count);
    const out: T[] = new Array(n);
    for (let i = 0; i < n; i++) {
      out[i] = this.items[this.head] as T;
      this.items[this.head] = undefined;
      this.head = (this.head + 1) % this.capacity;
    }
    this.count -= n;
    return out;
  }

  /** Puts items taken by `take` back at the front (a failed publish), as room allows. */
  requeueFront(items: readonly T[]): void {
    for (let i = items.length - 1; i >= 0; i--) {
      if (this.count === this.capacity) {
        // Full of newer items: the rest of the older ones are dropped.
        this.dropped += i + 1;
        return;
      }
      this.head = (this.head - 1 + this.capacity) % this.capacity;
      this.items[this.head] = items[i];
      this.count += 1;
    }
  }
}
