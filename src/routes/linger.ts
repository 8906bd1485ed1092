import type { IncomingMessage } from "node:http";

/** Bounds of a lingering read (--body-linger-secs, --body-linger-bytes). */
export interface LingerLimits {
  maxMs: number;
  maxBytes: number;
}

/**
 * Lingering close, as nginx does it: after the router answered early (413, 503, 401, ...) while
 * the client is still sending its body, keep reading and discarding the rest of the body for a
 * bounded time and size instead of closing at once. Closing a socket with unread data makes the
 * kernel answer the client's next write with a reset, and the reset can throw away the answer the
 * client has not read yet. If the body ends within the bounds, the connection stays usable
 * (keep-alive); past them the socket is destroyed.
 */
export function lingerOnUnreadBody(incoming: IncomingMessage, limits: LingerLimits): void {
  if (incoming.complete || incoming.destroyed) return;
  if (discardInParser(incoming, limits)) return;
  const socket = incoming.socket;
  let drained = 0;
  const stop = (cut: boolean) => {
    clearTimeout(timer);
    incoming.off("data", onData);
    incoming.off("end", onEnd);
    socket.off("close", onEnd);
    if (cut) socket.destroy();
  };
  const onData = (chunk: Buffer) => {
    drained += chunk.length;
    if (drained > limits.maxBytes) stop(true);
  };
  const onEnd = () => stop(false);
  const timer = setTimeout(() => stop(true), limits.maxMs);
  timer.unref();
  incoming.on("data", onData);
  incoming.on("end", onEnd);
  socket.on("close", onEnd);
  incoming.resume();
}

/** Node's HTTP parser, as far as the discarding below touches it: callbacks in numbered slots. */
interface ParserCallbacks {
  [slot: number]: unknown;
  incoming?: unknown;
}

/**
 * Discards the rest of a body of known length inside Node's HTTP parser, never handing it to
 * JavaScript; false when it cannot (no Content-Length, a body past `maxBytes`, a Node whose
 * parser looks otherwise), and the body is drained through the stream instead.
 *
 * Through the stream, the parser copies each piece of the body into a new Buffer first: a flood
 * of refused 240 KB bodies was 110 MB/s of copies, and a full garbage collection every ~100 ms
 * behind them. The parser makes no copy while it has no body callback (node/src/node_http_parser.cc,
 * on_body looks the callback up first), so the callback is taken off for the rest of this body,
 * and put back when the message ends, in the same pass of the parser, before it reads the
 * connection's next request, or when the connection closes. The parser still counts the body's
 * bytes to find its end, so the connection stays in step for keep-alive; the declared length
 * bounds what is read, and --body-linger-secs how long.
 */
function discardInParser(incoming: IncomingMessage, limits: LingerLimits): boolean {
  const declared = Number(incoming.headers["content-length"]);
  if (!(declared <= limits.maxBytes)) return false;
  const socket = incoming.socket;
  const parser = (socket as { parser?: ParserCallbacks | null }).parser;
  if (parser == null || parser.incoming !== incoming) return false;
  const body = slotNamed(parser, "parserOnBody");
  const complete = slotNamed(parser, "parserOnMessageComplete");
  if (body === undefined || complete === undefined) return false;
  const onBody = parser[body];
  const onComplete = parser[complete] as (this: unknown, ...args: unknown[]) => unknown;
  const restore = () => {
    clearTimeout(timer);
    socket.off("close", restore);
    parser[body] = onBody;
    parser[complete] = onComplete;
  };
  parser[body] = null;
  parser[complete] = function completed(this: unknown, ...args: unknown[]) {
    restore();
    return onComplete.apply(this, args);
  };
  const timer = setTimeout(() => {
    restore();
    socket.destroy();
  }, limits.maxMs);
  timer.unref();
  socket.on("close", restore);
  // Pieces that came before the callback was taken off flow out of the stream, unread.
  incoming.resume();
  return true;
}

/** Slots Node's parser keeps its callbacks in (kOnMessageBegin... kOnTimeout: 0-6). */
const PARSER_SLOTS = 8;

function slotNamed(parser: ParserCallbacks, name: string): number | undefined {
  for (let slot = 0; slot < PARSER_SLOTS; slot++) {
    const callback = parser[slot];
    if (typeof callback === "function" && callback.name === name) return slot;
  }
  return undefined;
}
