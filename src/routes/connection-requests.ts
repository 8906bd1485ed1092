import type { Socket } from "node:net";

/**
 * The requests read from one client connection: closing it ends them all, and they are served
 * one at a time, in their order. Node reads HTTP/1.1 pipelined requests ahead and hands each to
 * the router before the one in front has been answered; only the one being answered has its
 * response on the socket, so the others would not hear the connection close through their
 * response, and would queue, wait and reach a worker after the client has gone. And served at
 * once, 1,000 pipelined requests on one connection cost the router 1,000 requests' work in one
 * event-loop turn (their bodies, routing, upstream connections): `/health` waited seconds
 * (bench:faults, pipelined-close). Their answers leave in order anyway, one after the other, so
 * a request behind another waits for it before any work, as proxies serve pipelined requests
 * (nginx reads the next request of a connection once the current one is answered). One "close"
 * listener per connection, not one per request.
 */
interface Connection {
  /**
   * Whom its closing cancels: an array, not a Set, since it holds one entry most of the time,
   * and a Set emptied and filled again for every request reallocates its table each time.
   */
  readonly closers: (() => void)[];
  /** A request of this connection is being served. */
  busy: boolean;
  /** The requests behind it, in their order: each starts when the one before it ends. */
  readonly waiting: (() => void)[];
}

const bySocket = new WeakMap<Socket, Connection>();

/** A request's place on its connection. */
export interface ConnectionTurn {
  /**
   * Resolves once every request read before this one on its connection has ended, or the
   * connection has closed; undefined when none is under way (no wait).
   */
  readonly ready: Promise<void> | undefined;
  /**
   * The request has ended: the next one of the connection may start. Once (later calls do
   * nothing); it needs no `this`, so it can be handed on as a listener.
   */
  readonly leave: () => void;
}

const CLOSED: ConnectionTurn = { ready: undefined, leave: () => {} };

/**
 * Joins a request to its connection: `onClose` is called when the connection closes (at once if
 * it already has), and the turn says when the request may start.
 */
export function joinConnection(socket: Socket, onClose: () => void): ConnectionTurn {
  if (socket.destroyed) {
    onClose();
    return CLOSED;
  }
  let connection = bySocket.get(socket);
  if (connection === undefined) {
    const c: Connection = { closers: [], busy: false, waiting: [] };
    connection = c;
    bySocket.set(socket, c);
    socket.once("close", () => {
      bySocket.delete(socket);
      for (const close of c.closers.splice(0)) close();
      // Those waiting start at once, to find themselves cancelled.
      for (const start of c.waiting.splice(0)) start();
    });
  }
  const c = connection;
  c.closers.push(onClose);
  let ready: Promise<void> | undefined;
  if (c.busy) ready = new Promise<void>((resolve) => c.waiting.push(resolve));
  else c.busy = true;
  let ended = false;
  const leave = () => {
    if (ended) return;
    ended = true;
    removeOne(c.closers, onClose);
    const next = c.waiting.shift();
    if (next === undefined) c.busy = false;
    else next();
  };
  return { ready, leave };
}

/** Takes `item` out of `list`, whose order does not matter: the last entry takes its place. */
function removeOne<T>(list: T[], item: T): void {
  const i = list.indexOf(item);
  if (i < 0) return;
  const last = list.pop() as T;
  if (i < list.length) list[i] = last;
}
