/**
 * Why an upstream request was aborted. The forwarder aborts with one of these as the signal's
 * reason, so whoever sees the failure afterwards (the catch around the request, the body's error
 * handler) can tell a client that left from a limit that fired.
 */
export class ClientAbort extends Error {
  constructor() {
    super("client disconnected");
  }
}

export class RequestTimeout extends Error {
  constructor() {
    super("request timeout");
  }
}

export class FirstByteTimeout extends Error {
  constructor(
    readonly limitMs = 0,
    readonly stream = false,
  ) {
    super("first-byte timeout");
  }

  /** The flag that set the limit, for the error message. */
  get flag(): string {
    return this.stream ? "--stream-first-byte-timeout-secs" : "--first-byte-timeout-secs";
  }
}

export class IdleTimeout extends Error {
  constructor() {
    super("idle timeout");
  }
}

/** The client took none of the answer for --client-stall-secs while its socket was full. */
export class ClientStall extends Error {
  constructor() {
    super("client stopped reading");
  }
}

/** The router's shutdown grace period ran out while this request was still going. */
export class ShutdownAbort extends Error {
  constructor() {
    super("router shutting down");
  }
}

/** setTimeout fires at once for delays past 2^31-1 ms (~24.8 days): clamp long settings. */
export function timerMs(ms: number): number {
  return Math.min(Math.max(0, ms), 2_147_483_647);
}
