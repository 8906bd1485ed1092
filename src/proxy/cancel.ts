import { EventEmitter } from "node:events";

/**
 * The data plane's abort signal: `aborted`, `reason` and an "abort" event, on an EventEmitter
 * rather than an AbortController. undici takes it as a request's `signal` (it listens with
 * `once("abort")` and reads `reason`). Why: an AbortController with one listener costs about
 * 3.7 µs on this machine, and every request made two of them plus undici's listener, close to a
 * tenth of the router's CPU per request (bench:overhead, docs/benchmarks.md).
 */
export class Cancel extends EventEmitter {
  aborted = false;
  reason: unknown = undefined;

  abort(reason?: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

/** Either kind of abort signal: a Cancel, or a standard AbortSignal (from a caller or a test). */
export type Abortable = Cancel | AbortSignal;

/** Calls `listener` once when `signal` aborts; returns the function that stops listening. */
export function onAbort(signal: Abortable, listener: () => void): () => void {
  if (signal instanceof Cancel) {
    signal.once("abort", listener);
    return () => signal.off("abort", listener);
  }
  signal.addEventListener("abort", listener, { once: true });
  return () => signal.removeEventListener("abort", listener);
}
