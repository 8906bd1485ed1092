import { type ErrorCode, RouterError } from "../errors.js";
import { ModuleProcess, OUT_OF_MEMORY } from "../watched-file/module-process.js";
import type { BodySummary, PairProtocolName } from "./body-summary.js";
import type { Endpoint } from "./routing-text.js";

/** One body to parse, as posted to a parse worker; the body's bytes follow on its byte channel. */
export interface ParseJob {
  id: number;
  endpoint: Endpoint;
  /** The body's length: the parser reads that many bytes from its byte channel. */
  bodyBytes: number;
  maxChars: number;
  withTokenizeInput: boolean;
  pairs?: PairProtocolName | undefined;
}

export type ParseResult =
  | { id: number; summary: BodySummary }
  | { id: number; error: { code: ErrorCode; message: string } };

interface PendingJob {
  job: ParseJob;
  body: Uint8Array;
  resolve: (summary: BodySummary) => void;
  reject: (err: Error) => void;
}

interface Slot {
  worker: ModuleProcess;
  current: PendingJob | undefined;
}

export interface ParsePoolOptions {
  /** Parse processes (--parse-workers). */
  size: number;
  /** Old-generation heap limit of each parse process (--parse-worker-memory-mb). */
  memoryMb: number;
}

/**
 * A small pool of child processes that parse large request bodies, so that JSON.parse and the
 * routing-text walk of a 60 MB body (seconds of CPU) never stall the event loop that serves every
 * other request. Processes, not worker threads: a body that needs more than the heap limit must
 * end only its parser, never the router (module-process.ts). Parsers start on first use and are
 * replaced when one dies (a body that needs more than its heap limit kills it: that request gets
 * 413, the next one gets a fresh parser).
 * Jobs wait in a FIFO queue; its length is bounded by the body budget (every queued body holds
 * its bytes in --max-body-buffer-bytes).
 */
export class ParsePool {
  private readonly slots: Slot[] = [];
  private readonly queue: PendingJob[] = [];
  private nextId = 1;
  private closed = false;
  /** Bodies parsed by a worker since start (tests and the benchmark read it). */
  completed = 0;

  constructor(private readonly options: ParsePoolOptions) {}

  summarize(
    endpoint: Endpoint,
    body: Buffer,
    maxChars: number,
    withTokenizeInput = false,
    pairs?: PairProtocolName,
  ): Promise<BodySummary> {
    if (this.closed) return Promise.reject(new RouterError("shutting_down"));
    return new Promise((resolve, reject) => {
      const job: ParseJob = {
        id: this.nextId++,
        endpoint,
        bodyBytes: body.byteLength,
        maxChars,
        withTokenizeInput,
        pairs,
      };
      this.queue.push({ job, body, resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const pending of this.queue.splice(0)) pending.reject(new RouterError("shutting_down"));
    await Promise.all(this.slots.splice(0).map((slot) => slot.worker.terminate()));
  }

  private dispatch(): void {
    while (this.queue.length > 0) {
      const slot = this.idleSlot();
      if (slot === undefined) return;
      const pending = this.queue.shift() as PendingJob;
      slot.current = pending;
      slot.worker.postMessage(pending.job);
      // Not in the message: a structured clone of a large body is copied twice and written in one
      // go on the event loop. The byte channel sends the body's own memory as the parser reads.
      slot.worker.postBytes(pending.body);
    }
  }

  private idleSlot(): Slot | undefined {
    const idle = this.slots.find((slot) => slot.current === undefined);
    if (idle !== undefined) return idle;
    if (this.slots.length >= this.options.size) return undefined;
    const slot: Slot = { worker: this.spawn(), current: undefined };
    this.slots.push(slot);
    this.watch(slot);
    return slot;
  }

  private spawn(): ModuleProcess {
    return new ModuleProcess(new URL("./parse-worker.js", import.meta.url), {
      memoryMb: this.options.memoryMb,
      byteChannel: true,
    });
  }

  private watch(slot: Slot): void {
    slot.worker.on("message", (result: ParseResult) => {
      const pending = slot.current;
      slot.current = undefined;
      if (pending !== undefined && pending.job.id === result.id) {
        if ("summary" in result) {
          this.completed += 1;
          pending.resolve(result.summary);
        } else {
          pending.reject(new RouterError(result.error.code, result.error.message));
        }
      }
      this.dispatch();
    });
    slot.worker.on("error", (err: Error & { code?: string }) => {
      const pending = slot.current;
      slot.current = undefined;
      if (pending !== undefined) {
        pending.reject(
          err.code === OUT_OF_MEMORY
            ? new RouterError(
                "payload_too_large",
                `Parsing this request body needs more than ${this.options.memoryMb} MB (--parse-worker-memory-mb).`,
              )
            : err,
        );
      }
    });
    slot.worker.on("exit", () => {
      const at = this.slots.indexOf(slot);
      if (at >= 0) this.slots.splice(at, 1);
      const pending = slot.current;
      slot.current = undefined;
      pending?.reject(new Error("parse worker exited"));
      if (!this.closed) this.dispatch();
    });
  }
}
