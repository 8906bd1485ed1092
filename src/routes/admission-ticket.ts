import type { AdmissionTicket } from "../admission/step.js";
import type { ReceivedRequest } from "../intake/intake.js";
import type { Cancel } from "../proxy/cancel.js";
import { admitted } from "../workers/served-models.js";
import type { RouterContext } from "./context.js";

/** Longest per-request queue timeout a header may ask for, before the flag's cap. */
const HEADER_TIMEOUT = /^\s*\d+(\.\d+)?\s*$/;

/**
 * What admission may ask about one received request; each part is worked out only when asked
 * (a request that goes at once never has its tenant read or its cost counted).
 */
export function admissionTicket(
  ctx: Pick<RouterContext, "config" | "intake" | "registry">,
  received: ReceivedRequest,
  signal: Cancel,
): AdmissionTicket {
  return {
    signal,
    identity: () => ctx.intake.identify(received),
    candidates: () => {
      const plan = ctx.intake.plan(received);
      return plan.route === "not_found" ? [] : admitted(ctx.registry.candidates(), plan);
    },
    cost: () => ctx.intake.cost(received),
    timeoutMs: () => queueTimeoutMs(ctx.config, received.headers[ctx.config.queueTimeoutHeader]),
  };
}

/** --queue-timeout-secs, shortened (never lengthened) by the request's --queue-timeout-header. */
export function queueTimeoutMs(
  config: { queueTimeoutMs: number },
  header: string | string[] | undefined,
): number {
  const cap = config.queueTimeoutMs;
  if (typeof header !== "string" || !HEADER_TIMEOUT.test(header)) return cap;
  return Math.min(cap, Number(header) * 1000);
}
