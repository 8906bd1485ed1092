/**
 * Fault knobs of a simulated worker, changeable at run time (setFaults or POST /_sim/faults).
 * "Inference requests" are POSTs to /v1/chat/completions, /v1/completions, /generate and
 * /v1/embeddings; the knobs are checked in this order: status, failFirst, hang.
 */

export interface SimFaults {
  /** Answer every inference request with this HTTP status and a JSON error; null = off. */
  status: number | null;
  /** The next N inference requests fail with `failStatus` (setting it restarts the count). */
  failFirst: number;
  /** Status used by failFirst. */
  failStatus: number;
  /** Accept inference requests and never answer, until the client aborts or the worker closes. */
  hang: boolean;
  /** Destroy the socket of a streamed response after K token chunks; null = off. */
  crashMidStream: number | null;
  /** Multiply every engine delay (1 = normal, 3 = three times slower). */
  slowdown: number;
  /** GET /health answers 503. */
  unhealthy: boolean;
}

export const DEFAULT_FAULTS: Readonly<SimFaults> = Object.freeze({
  status: null,
  failFirst: 0,
  failStatus: 500,
  hang: false,
  crashMidStream: null,
  slowdown: 1,
  unhealthy: false,
});

/** Apply a partial update (e.g. parsed JSON) on top of `current`; throws RangeError on bad input. */
export function mergeFaults(current: SimFaults, update: unknown): SimFaults {
  if (update === null || typeof update !== "object" || Array.isArray(update)) {
    throw new RangeError("faults must be a JSON object");
  }
  const next = { ...current };
  for (const [key, value] of Object.entries(update)) {
    switch (key) {
      case "status":
        next.status = value === null || value === 0 ? null : httpStatus(key, value);
        break;
      case "failFirst":
        next.failFirst = count(key, value);
        break;
      case "failStatus":
        next.failStatus = httpStatus(key, value);
        break;
      case "hang":
        next.hang = bool(key, value);
        break;
      case "crashMidStream":
        next.crashMidStream = value === null ? null : count(key, value);
        break;
      case "slowdown":
        if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
          throw new RangeError(
            `slowdown must be a finite number >= 0, got ${JSON.stringify(value)}`,
          );
        }
        next.slowdown = value;
        break;
      case "unhealthy":
        next.unhealthy = bool(key, value);
        break;
      default:
        throw new RangeError(`unknown fault knob "${key}"`);
    }
  }
  return next;
}

function httpStatus(key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 200 || value > 599) {
    throw new RangeError(`${key} must be an HTTP status 200-599, got ${JSON.stringify(value)}`);
  }
  return value;
}

function count(key: string, value: unknown): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw new RangeError(`${key} must be an integer >= 0, got ${JSON.stringify(value)}`);
  }
  return value;
}

function bool(key: string, value: unknown): boolean {
  if (typeof value !== "boolean") {
    throw new RangeError(`${key} must be true or false, got ${JSON.stringify(value)}`);
  }
  return value;
}
