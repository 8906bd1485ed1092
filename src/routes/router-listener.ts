import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import { getRequestListener, type HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { RouterError } from "../errors.js";
import type { Endpoint } from "../intake/routing-text.js";
import {
  PEER_SIGNATURE_HEADER,
  REQUEST_HEADER,
  verifyPeerCall,
} from "../proxy/leader-decisions.js";
import { CALL_HEADER } from "../proxy/remote-relay.js";
import { writeError } from "../proxy/write-error.js";
import type { RouterContext } from "./context.js";
import { Cors } from "./cors.js";
import { INFERENCE_ROUTES } from "./inference.js";
import { handleInference } from "./pipeline.js";
import { answerRelayCall } from "./relay-call.js";

/**
 * The router's node:http listener. The inference POSTs (nearly all the traffic) go straight to
 * their handler, which answers on the raw response; everything else (ops, admin, the model list,
 * wrong methods) goes through hono. Why: hono's adapter builds a Request, a Context and a promise
 * chain for every request, none of which the data plane uses (bench:overhead's profile,
 * docs/benchmarks.md).
 */
export function routerListener(
  ctx: RouterContext,
  app: Hono<{ Bindings: HttpBindings }>,
): RequestListener {
  const viaHono = getRequestListener(app.fetch);
  const endpoints = new Map(INFERENCE_ROUTES.map(({ path, endpoint }) => [path, endpoint]));
  const cors = new Cors(ctx.config.corsAllowedOrigins);
  return (incoming: IncomingMessage, res: ServerResponse) => {
    const url = incoming.url ?? "/";
    const query = url.indexOf("?");
    const path = query === -1 ? url : url.slice(0, query);
    if (cors.apply(incoming, res, path)) return;
    if (incoming.method === "POST") {
      const endpoint = endpoints.get(path);
      if (endpoint !== undefined) {
        const call = incoming.headers[CALL_HEADER];
        if (call !== undefined && ctx.peerCalls !== undefined) {
          peerCall(ctx, ctx.peerCalls, incoming, res, call, endpoint);
          return;
        }
        handleInference(ctx, incoming, res, endpoint).catch((err: unknown) =>
          ctx.logger.error({ err }, "unhandled error in the data plane"),
        );
        return;
      }
    }
    void viaHono(incoming, res);
  };
}

/**
 * A replica's call as this one leads (--state-relay decisions, proxy/leader-decisions.ts), taken
 * only with a fresh signature under the fleet's secret: a client cannot pose as a replica.
 */
function peerCall(
  ctx: RouterContext,
  calls: NonNullable<RouterContext["peerCalls"]>,
  incoming: IncomingMessage,
  res: ServerResponse,
  call: string | string[],
  endpoint: Endpoint,
): void {
  const headers = incoming.headers;
  // A decide call names its request as any request does; the others by the decision's id.
  const id = call === "decide" ? headers["x-request-id"] : headers[REQUEST_HEADER];
  if (
    typeof call !== "string" ||
    !verifyPeerCall(
      calls.secret,
      call,
      typeof id === "string" ? id : "",
      headers[PEER_SIGNATURE_HEADER],
    )
  ) {
    const error = new RouterError(
      "forbidden",
      "x-radixgate-call is for the router's own replicas: the call is not signed with the fleet's --state-secret.",
    );
    writeError(res, error, "");
    incoming.resume();
    return;
  }
  // Cleared, not deleted (routes/decision.ts says why): the worker never sees them.
  headers[CALL_HEADER] = undefined;
  headers[PEER_SIGNATURE_HEADER] = undefined;
  answerRelayCall(ctx, calls.relays, incoming, res, call, endpoint);
}
