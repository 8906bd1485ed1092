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

/**
 * The client went away (while its body was read, or while it waited for admission); there is no
 * one left to answer.
 */
export class ClientGoneError extends Error {
  constructor() {
    super("client disconnected");
    this.name = "ClientGoneError";
  }
}
