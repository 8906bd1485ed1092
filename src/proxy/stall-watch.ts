import { timerMs } from "./abort-reasons.js";

/** What the watch reads of the client's response (a node:http ServerResponse). */
export interface WatchedResponse {
  readonly writableLength: number;
  readonly writableNeedDrain: boolean;
}

/**
 * Runs while the client's socket is full (a write returned false, until "drain"). Each period of
 * `limitMs` the bytes still queued for the client are compared with the last look: fewer means the
 * client took some (a slow reader is progress); as many means it took nothing, and `onStall` runs.
 */
export class StallWatch {
  private timer: NodeJS.Timeout | undefined;
  private queued = 0;

  constructor(
    private readonly res: WatchedResponse,
    private readonly limitMs: number,
    private readonly onStall: () => void,
  ) {}

  start(): void {
    if (this.limitMs <= 0 || this.timer !== undefined) return;
    this.queued = this.res.writableLength;
    this.timer = setTimeout(() => this.check(), timerMs(this.limitMs));
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private check(): void {
    const queued = this.res.writableLength;
    if (!this.res.writableNeedDrain || queued < this.queued) {
      this.queued = queued;
      this.timer?.refresh();
      return;
    }
    this.timer = undefined;
    this.onStall();
  }
}
