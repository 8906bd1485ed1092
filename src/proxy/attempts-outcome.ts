import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import type { Cancel } from "./cancel.js";
import type { AttemptFailure } from "./upstream-failure.js";
import { writeError } from "./write-error.js";

/**
 * How a request ends when its attempts ran out without an answer, shared by the
 * forwarder and the PD pair forwarder: 499 when the client left, else the last
 * failure's error is written. Undefined when no attempt failed (the caller says why
 * there was no worker).
 */
export function attemptsOutcome(
  req: { clientSignal: Cancel; requestId: string },
  res: ServerResponse,
  attempts: number,
  lastFailure: AttemptFailure | undefined,
): { status: number; attempts: number; error: string } | undefined {
  if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
  if (lastFailure === undefined) return undefined;
  const error = new RouterError(lastFailure.code, lastFailure.message);
  writeError(res, error, req.requestId);
  return { status: error.status, attempts, error: lastFailure.kind };
}
