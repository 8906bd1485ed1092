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
