/**
 * The decision endpoint (--data-plane nginx): nginx passes it each inference request, body and
 * all, and its answer says where nginx relays it. It runs the same pipeline as the Node.js data
 * plane (routes/pipeline.ts: receive, admit, schedule, complete); only the forward stage's
 * attempts are relayed by nginx (proxy/remote-relay.ts). While admission holds the request, the
 * call simply waits; a client that goes away closes it, which cancels the request.
 *
 * nginx marks its calls with x-radixgate-call (and clears the header on everything else it
 * passes here):
 *
 *   decide  POST <the client's path and query>, the client's headers and body: the first decision
 *   retry   x-radixgate-request: <key>, x-radixgate-failed: <$upstream_status>: the relay failed
 *           before any byte reached the client; radixgate fails that attempt and decides again
 *   body    x-radixgate-request: <key>: the body radixgate rewrote for the attempt under way
 *
 * <key> is the decision's x-rg-key, made by the relays for that request alone: never the client's
 * request id, which two requests in flight may share.
 *
 * A decision is an empty 200 answer whose X-Accel-Redirect names the relay location, with the
 * relay's values in x-rg-* headers (nginx/config.ts copies them into variables there). Anything
 * else is a refusal (400, 401, 404, 413, 429, 503... with the OpenAI error body), which nginx
 * gives the client as it is. In nginx's source (src/http/ngx_http_upstream.c,
 * ngx_http_upstream_process_headers), X-Accel-Redirect to a named location keeps the method and
 * the request body (only a URI target switches to GET), and only a few of the decision's headers
 * reach the client (those marked `redirect`: Content-Type, Set-Cookie, Cache-Control...), so the
 * decision sends none of them. An empty answer (Content-Length: 0) keeps the connection alive
 * (ngx_http_proxy_process_header sets u->keepalive for it).
 *
 * This listener is reachable only through a unix socket in radixgate's private directory; nginx
 * names the client's address in x-radixgate-client-addr (and strips the header from clients), so
 * loopback-only admin access and per-client budgets see the real client.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { CALL_HEADER, type RemoteRelays } from "../proxy/remote-relay.js";
import type { RouterContext } from "./context.js";
import { INFERENCE_ROUTES } from "./inference.js";
import { answerRelayCall } from "./relay-call.js";
import { routerListener } from "./router-listener.js";

export const CLIENT_ADDRESS_HEADER = "x-radixgate-client-addr";

const CLIENT_ADDRESS = Symbol("radixgate.clientAddress");
type NamedSocket = Socket & { [CLIENT_ADDRESS]?: { address: string | undefined } };

/**
 * The client's address nginx named for the request a connection carries now: the socket's
 * `remoteAddress` from here on. The property is defined once per connection and reads a slot:
 * redefining it for every request changed the socket object's shape each time.
 */
export function nameClientAddress(socket: Socket, address: string | undefined): void {
  const named = socket as NamedSocket;
  let slot = named[CLIENT_ADDRESS];
  if (slot === undefined) {
    const created = { address };
    slot = created;
    named[CLIENT_ADDRESS] = created;
    Object.defineProperty(socket, "remoteAddress", {
      get: () => created.address,
      configurable: true,
    });
  }
  slot.address = address;
}

export function decisionListener(
  ctx: RouterContext,
  app: Hono<{ Bindings: HttpBindings }>,
  relays: RemoteRelays,
): RequestListener {
  const inner = routerListener(ctx, app);
  const endpoints = new Map(INFERENCE_ROUTES.map(({ path, endpoint }) => [path, endpoint]));
  return (incoming: IncomingMessage, res: ServerResponse) => {
    // nginx answers its clients with its own Date header, never this one.
    res.sendDate = false;
    const headers = incoming.headers;
    const client = headers[CLIENT_ADDRESS_HEADER];
    // One request at a time per nginx connection: the address holds for this request's handling.
    nameClientAddress(incoming.socket, typeof client === "string" ? client : undefined);
    const call = headers[CALL_HEADER];
    if (call === undefined) {
      delete headers[CLIENT_ADDRESS_HEADER];
      inner(incoming, res);
      return;
    }
    // Cleared, not deleted: a delete turns the headers object into a dictionary, and the pipeline
    // reads it a dozen times a decision and copies it for the worker (2-3x slower, measured). The
    // copy leaves out a header without a value.
    headers[CLIENT_ADDRESS_HEADER] = undefined;
    headers[CALL_HEADER] = undefined;
    const url = incoming.url ?? "/";
    const query = url.indexOf("?");
    answerRelayCall(
      ctx,
      relays,
      incoming,
      res,
      call,
      endpoints.get(query === -1 ? url : url.slice(0, query)),
    );
  };
}
