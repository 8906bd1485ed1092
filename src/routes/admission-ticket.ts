import { requestTicket } from "../admission/request-ticket.js";
import type { AdmissionTicket } from "../admission/step.js";
import type { ReceivedRequest } from "../intake/intake.js";
import type { Cancel } from "../proxy/cancel.js";
import type { RouterContext } from "./context.js";

/** Longest per-request queue timeout a header may ask for, before the flag's cap. */
const HEADER_TIMEOUT = /^\s*\d+(\.\d+)?\s*$/;

/**
 * Admission's ticket for one received request, made of facts intake already read: while the
 * request waits, admission works its parts out with its own and workers/ code, never calling
 * back into intake/ or routes/ (admission/request-ticket.ts).
 */
export function admissionTicket(
  ctx: Pick<RouterContext, "config" | "intake" | "registry">,
  received: ReceivedRequest,
  signal: Cancel,
): AdmissionTicket {
  const { summary, headers } = received;
  const { intake } = ctx;
  return requestTicket(
    {
      headers,
      model: summary?.model,
      endpoint: received.endpoint,
      textChars: summary?.text.length,
      maxTokens: summary?.maxTokens,
      timeoutMs: queueTimeoutMs(ctx.config, headers[ctx.config.queueTimeoutHeader]),
    },
    {
      fleet: ctx.registry,
      modelRouting: intake.modelRouting,
      identity: intake.identity,
      tenants: intake.tenants,
    },
    signal,
  );
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
