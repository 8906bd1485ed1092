/**
 * The decision endpoint (--data-plane nginx): nginx hands it each inference request's body and
 * gets back where to relay it. It runs the same pipeline as the Node.js data plane
 * (routes/pipeline.ts: receive, admit, schedule, complete); only the forward stage's attempts are
 * relayed by nginx (proxy/remote-relay.ts). A refusal (401, 404, 413, 429, 503...) is answered
 * as on the Node.js data plane, and nginx gives it to the client as it is. While admission holds
 * the request, the call simply waits.
 *
 *   POST /_radixgate/decide?p=<path and query>            a request's first decision
 *   POST /_radixgate/decide?r=<request id>&s=<status>      its attempt failed before any byte
 *
 * This listener is reachable only through a unix socket in radixgate's private directory; nginx
 * names the client's address in x-radixgate-client-addr (and strips the header from clients), so
 * loopback-only admin access and per-client budgets see the real client.
 */
import type { IncomingMessage, RequestListener, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { RouterError } from "../errors.js";
import type { RemoteRelays } from "../proxy/remote-relay.js";
import { writeError } from "../proxy/write-error.js";
import type { RouterContext } from "./context.js";
import { INFERENCE_ROUTES } from "./inference.js";
import { handleInference } from "./pipeline.js";
import { routerListener } from "./router-listener.js";

export const DECISION_PATH = "/_radixgate/decide";
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
    const client = incoming.headers[CLIENT_ADDRESS_HEADER];
    // One request at a time per nginx connection: the address holds for this request's handling.
    nameClientAddress(incoming.socket, typeof client === "string" ? client : undefined);
    delete incoming.headers[CLIENT_ADDRESS_HEADER];
    const url = incoming.url ?? "/";
    if (incoming.method !== "POST" || !url.startsWith(`${DECISION_PATH}?`)) {
      inner(incoming, res);
      return;
    }
    const query = new URLSearchParams(url.slice(DECISION_PATH.length + 1));
    const retryOf = query.get("r");
    if (retryOf !== null) {
      const status = Number(
        query
          .get("s")
          ?.split(/[ ,:]+/)
          .pop(),
      );
      if (!relays.retry(retryOf, res, status)) {
        const error = new RouterError(
          "upstream_error",
          "The worker could not be reached and the request is no longer known to the router.",
        );
        writeError(res, error, retryOf);
      }
      incoming.resume();
      return;
    }
    const path = query.get("p") ?? "";
    const endpoint = endpoints.get(path.split("?")[0] ?? "");
    if (endpoint === undefined || !path.startsWith("/")) {
      writeError(res, new RouterError("not_found", `No inference route ${path}.`), "");
      incoming.resume();
      return;
    }
    // The pipeline reads the client's path, as on the Node.js data plane.
    incoming.url = path;
    relays.open(res);
    handleInference(ctx, incoming, res, endpoint)
      .catch((err: unknown) => ctx.logger.error({ err }, "unhandled error in the data plane"))
      .finally(() => relays.close(res));
  };
}
