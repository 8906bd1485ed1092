import type { IncomingMessage } from "node:http";
import type { BodyLease } from "../proxy/body-budget.js";
import { type BodySummary, summarizeBody } from "../proxy/body-summary.js";
import { readBody } from "../proxy/read-body.js";
import type { Endpoint } from "../proxy/routing-text.js";
import { checkContentType } from "./content-type.js";
import type { RouterContext } from "./context.js";

/**
 * Reads one inference request's body within the data plane's bounds (size, time, the router-wide
 * body budget through `lease`) and summarizes it: routing text, model, stream, session fields.
 * A large body is parsed off the event loop (--parse-workers), so it cannot stall other requests.
 */
export async function readRequestBody(
  ctx: RouterContext,
  incoming: IncomingMessage,
  endpoint: Endpoint,
  lease: BodyLease,
): Promise<{ body: Buffer; summary: BodySummary }> {
  const { config } = ctx;
  checkContentType(incoming.headers["content-type"]);
  const body = await readBody(
    incoming,
    {
      maxBytes: config.maxPayloadSize,
      totalTimeoutMs: config.bodyReadTimeoutSecs * 1000,
      idleTimeoutMs: config.bodyIdleTimeoutSecs * 1000,
      minBytesPerSec: config.bodyMinRateBytes,
      sharedFrom: ctx.parsePool !== undefined ? config.parseOffloadBytes : undefined,
    },
    lease,
  );
  const withTokenizeInput = ctx.kvEvents !== undefined;
  const summary =
    ctx.parsePool !== undefined && body.byteLength >= config.parseOffloadBytes
      ? await ctx.parsePool.summarize(endpoint, body, config.maxRoutingTextChars, withTokenizeInput)
      : summarizeBody(endpoint, body, config.maxRoutingTextChars, withTokenizeInput);
  return { body, summary };
}
