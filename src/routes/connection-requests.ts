import type { Socket } from "node:net";

/**
 * The requests read from one client connection, so that closing it ends them all. Node reads
 * HTTP/1.1 pipelined requests ahead and hands each to the router before the one in front has been
 * answered; only the one being answered has its response on the socket, so the others would not
 * hear the connection close through their response, and would queue, wait and reach a worker after
 * the client has gone. One "close" listener per connection, not one per request.
 */
const bySocket = new WeakMap<Socket, Set<() => void>>();

/**
 * Calls `onClose` when `socket` closes (at once if it already has); the returned function forgets
 * it, to be called when the request ends.
 */
export function onConnectionClose(socket: Socket, onClose: () => void): () => void {
  if (socket.destroyed) {
    onClose();
    return () => {};
  }
  let requests = bySocket.get(socket);
  if (requests === undefined) {
    const set = new Set<() => void>();
    requests = set;
    bySocket.set(socket, set);
    socket.once("close", () => {
      bySocket.delete(socket);
      for (const close of set) close();
      set.clear();
    });
  }
  const set = requests;
  set.add(onClose);
  return () => {
    set.delete(onClose);
  };
}
