import type { PrefixIndex } from "../index/prefix-index.js";
import type { Logger } from "../logger.js";

/** The registry as the hold sees it: who is registered, and who registers later. */
export interface HoldMembers {
  get(workerId: string): unknown;
  onChange(listener: (event: "added" | "removed", worker: { readonly id: string }) => void): void;
}

interface HeldText {
  readonly model: string | undefined;
  readonly text: string;
}

/** Longest a slice of inserts runs before the event loop gets a turn (as snapshot.ts loads). */
const SLICE_MS = 8;

/**
 * A loaded snapshot's texts for workers not registered yet, applied when they register: a router
 * that starts before discovery (or the peers' membership) has listed every worker would otherwise
 * drop what the engines it does not know yet still hold, and route them cold.
 *
 * Bounded: at most `maxChars` characters held (the snapshot's own size cap), each worker's texts
 * in the snapshot's order (oldest first, so the index evicts them as the writer would have); and
 * expiring: everything is dropped at `expiresAt` (the snapshot's time plus its maximum age, past
 * which the snapshot itself would be refused: the engines have moved on since).
 */
export class SnapshotHold {
  private readonly held = new Map<string, HeldText[]>();
  private chars = 0;
  private dropped = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly members: HoldMembers,
    private readonly index: Pick<PrefixIndex, "insert">,
    private readonly maxChars: number,
    private readonly logger: Logger,
  ) {
    members.onChange((event, worker) => {
      if (event === "added") void this.release(worker.id);
    });
  }

  /** The sink a snapshot load inserts through (snapshot.ts SnapshotSink): known workers now, the others held. */
  sink(): {
    known(id: string): boolean;
    insert(id: string, model: string | undefined, text: string): void;
    hold(id: string, model: string | undefined, text: string): void;
  } {
    return {
      known: (id) => this.members.get(id) !== undefined,
      insert: (id, model, text) => this.index.insert(id, model, text),
      hold: (id, model, text) => this.hold(id, model, text),
    };
  }

  /** Drops everything held at `at` (epoch ms); an earlier expiry than one set before wins. */
  expireAt(at: number, now = Date.now()): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.clear(), Math.max(0, at - now));
    this.timer.unref();
  }

  /** Characters held now, and texts refused for the bound. */
  get stats(): { workers: number; chars: number; dropped: number } {
    return { workers: this.held.size, chars: this.chars, dropped: this.dropped };
  }

  clear(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.held.clear();
    this.chars = 0;
  }

  private hold(workerId: string, model: string | undefined, text: string): void {
    if (this.chars + text.length > this.maxChars) {
      this.dropped += 1;
      return;
    }
    let texts = this.held.get(workerId);
    if (texts === undefined) {
      texts = [];
      this.held.set(workerId, texts);
    }
    texts.push({ model, text });
    this.chars += text.length;
  }

  /** The worker registered: its held texts go into the index, in slices of a few ms. */
  private async release(workerId: string): Promise<void> {
    const texts = this.held.get(workerId);
    if (texts === undefined) return;
    this.held.delete(workerId);
    for (const { text } of texts) this.chars -= text.length;
    let sliceStart = performance.now();
    let applied = 0;
    for (const { model, text } of texts) {
      // Removed again while the slices ran: the rest is not applied.
      if (this.members.get(workerId) === undefined) continue;
      this.index.insert(workerId, model, text);
      applied += 1;
      if (performance.now() - sliceStart > SLICE_MS) {
        await new Promise((resolve) => setImmediate(resolve));
        sliceStart = performance.now();
      }
    }
    this.logger.info(
      { worker: workerId, paths: applied },
      "index snapshot: applied the entries held for a worker that registered after the load",
    );
  }
}
