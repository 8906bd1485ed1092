/**
 * The simulator's prefill and decode roles (issue 25). A prefill worker computes prompts (and
 * keeps its prefix cache, as any worker); a decode worker receives their KV cache and generates.
 * The hand-off follows each engine's protocol, as far as a router can see it:
 *
 * - SGLang (`--disaggregation-mode prefill|decode`): the router sends the request to both with
 *   bootstrap_host, bootstrap_port and bootstrap_room. The prefill worker keeps a bootstrap
 *   server on its bootstrap port (SGLang's --disaggregation-bootstrap-port, default 8998); the
 *   decode worker asks it for the room and waits until the prefill of that room is done, so its
 *   first token comes after the prefill and the transfer. A decode request without the fields is
 *   refused (400), and a room whose prefill failed or never came fails the decode (500).
 * - vLLM (NixlConnector, kv_producer / kv_consumer): the prefill worker answers a request with
 *   kv_transfer_params {do_remote_decode: true} with the transfer params of its KV blocks
 *   (remote_engine_id, remote_host, remote_port, remote_block_ids...); the decode worker needs
 *   them (400 without) and pulls the blocks from that host before it generates.
 *
 * The transfer itself costs `transferTokensPerSec` (model time, scaled like every delay).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { PrefixKvCache } from "./kv-cache.js";
import { BadRequest } from "./protocol.js";
import { sendJson } from "./serve.js";

export type SimRole = "prefill" | "decode";

/** SGLang's default --disaggregation-bootstrap-port. */
export const DEFAULT_BOOTSTRAP_PORT = 8998;

/** Rooms (SGLang) or transfer ids (vLLM) the board remembers at most; the oldest go first. */
const MAX_ROOMS = 10_000;

type RoomState = "pending" | "ready" | "failed";

interface Room {
  state: RoomState;
  waiters: ((state: RoomState) => void)[];
}

/**
 * What a prefill worker knows about its hand-offs: each room is pending (its prefill runs, or
 * has not arrived yet), ready or failed; a decode worker's question waits for the answer.
 */
export class RoomBoard {
  private readonly rooms = new Map<string, Room>();

  private room(id: string): Room {
    let room = this.rooms.get(id);
    if (room === undefined) {
      room = { state: "pending", waiters: [] };
      this.rooms.set(id, room);
      if (this.rooms.size > MAX_ROOMS) {
        const oldest = this.rooms.keys().next().value as string;
        this.settle(oldest, "failed");
        this.rooms.delete(oldest);
      }
    }
    return room;
  }

  /** The prefill of these rooms is done (true) or failed (false). */
  settle(id: string, state: "ready" | "failed"): void {
    const room = this.room(id);
    if (room.state !== "pending") return;
    room.state = state;
    for (const wake of room.waiters.splice(0)) wake(state);
  }

  /** Waits (at most `timeoutMs`) for a room to be settled; "pending" when it was not in time. */
  wait(id: string, timeoutMs: number): Promise<RoomState> {
    const room = this.room(id);
    if (room.state !== "pending") return Promise.resolve(room.state);
    return new Promise((resolve) => {
      const wake = (state: RoomState) => {
        clearTimeout(timer);
        resolve(state);
      };
      const timer = setTimeout(() => {
        room.waiters.splice(room.waiters.indexOf(wake), 1);
        resolve("pending");
      }, timeoutMs);
      room.waiters.push(wake);
    });
  }
}

/** GET /room/<id>?timeout_ms=N on a board: 200 ready, 409 failed, 504 not in time. */
export async function answerRoom(
  board: RoomBoard,
  path: string,
  res: ServerResponse,
): Promise<boolean> {
  const url = new URL(path, "http://sim");
  const match = /^\/(?:_sim\/kv|bootstrap\/room)\/([^/]+)$/.exec(url.pathname);
  if (match === null) return false;
  const timeoutMs = Math.min(Number(url.searchParams.get("timeout_ms") ?? 30_000) || 0, 600_000);
  const state = await board.wait(decodeURIComponent(match[1]!), timeoutMs);
  if (state === "ready") sendJson(res, 200, { state });
  else sendJson(res, state === "failed" ? 409 : 504, { state });
  return true;
}

/** SGLang's bootstrap server of a prefill worker: its own port, answering about rooms. */
export async function startBootstrapServer(
  board: RoomBoard,
  host: string,
  port: number,
): Promise<Server> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    answerRoom(board, req.url ?? "/", res)
      .then((answered) => {
        if (!answered) sendJson(res, 404, { detail: "Not Found" });
      })
      .catch(() => res.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

export function boundPort(server: Server): number {
  return (server.address() as AddressInfo).port;
}

/** One field of SGLang's hand-off: a value, or one per batch item. */
function items(value: unknown, count: number): unknown[] {
  return Array.isArray(value) ? value : Array(count).fill(value);
}

/** The rooms of an SGLang PD request, as strings; throws BadRequest when they are missing. */
export function sglangRooms(body: Record<string, unknown>, role: SimRole): string[] {
  const room = body.bootstrap_room;
  const missing = ["bootstrap_host", "bootstrap_room"].filter((f) => body[f] === undefined);
  if (role === "decode" && !("bootstrap_port" in body)) missing.push("bootstrap_port");
  if (missing.length > 0) {
    throw new BadRequest(
      `this is a ${role} server (--disaggregation-mode ${role}): the request has no ${missing.join(", ")}; send it through a router in PD mode (--pd-disaggregation)`,
      missing[0],
    );
  }
  const rooms = Array.isArray(room) ? room : [room];
  if (rooms.length === 0 || rooms.some((r) => typeof r !== "number" || !Number.isInteger(r))) {
    throw new BadRequest(
      "bootstrap_room must be an integer (or one per batch item)",
      "bootstrap_room",
    );
  }
  return rooms.map((r) => String(r));
}

/** Where a decode worker fetches each room from: bootstrap_host:bootstrap_port per item. */
export function sglangSources(
  body: Record<string, unknown>,
  rooms: readonly string[],
  defaultPort: number,
): { host: string; port: number; room: string }[] {
  const hosts = items(body.bootstrap_host, rooms.length);
  const ports = items(body.bootstrap_port, rooms.length);
  return rooms.map((room, i) => {
    const host = hosts[i];
    const port = ports[i] ?? defaultPort;
    if (typeof host !== "string" || host === "" || typeof port !== "number") {
      throw new BadRequest(
        "bootstrap_host must be a host name and bootstrap_port a port number or null",
        "bootstrap_host",
      );
    }
    return { host, port, room };
  });
}

/** What a vLLM decode worker needs from the prefill worker's answer. */
export interface VllmTransfer {
  remoteHost: string;
  remotePort: number;
  remoteRequestId: string;
  blocks: number;
}

/** The transfer params of a vLLM decode request; throws BadRequest without them. */
export function vllmTransfer(body: Record<string, unknown>): VllmTransfer {
  const params = body.kv_transfer_params as Record<string, unknown> | undefined;
  const ok =
    typeof params === "object" &&
    params !== null &&
    params.do_remote_prefill === true &&
    typeof params.remote_engine_id === "string" &&
    typeof params.remote_host === "string" &&
    typeof params.remote_port === "number" &&
    Array.isArray(params.remote_block_ids) &&
    typeof params.remote_request_id === "string";
  if (!ok) {
    throw new BadRequest(
      "this is a decode server (kv_role kv_consumer): the request needs the kv_transfer_params a prefill server answered (do_remote_prefill, remote_engine_id, remote_host, remote_port, remote_block_ids); send it through a router in P/D mode (--vllm-pd-disaggregation)",
      "kv_transfer_params",
    );
  }
  return {
    remoteHost: params.remote_host as string,
    remotePort: params.remote_port as number,
    remoteRequestId: params.remote_request_id as string,
    blocks: (params.remote_block_ids as unknown[]).length,
  };
}

/** A prefill request of vLLM's P/D must ask for a remote decode. */
export function vllmPrefillAsked(body: Record<string, unknown>): void {
  const params = body.kv_transfer_params as Record<string, unknown> | undefined;
  if (params?.do_remote_decode !== true) {
    throw new BadRequest(
      "this is a prefill server (kv_role kv_producer): the request needs kv_transfer_params with do_remote_decode true; send it through a router in P/D mode (--vllm-pd-disaggregation)",
      "kv_transfer_params",
    );
  }
}

/** The transfer params a vLLM prefill worker answers with (vLLM's NixlConnector fields). */
export function vllmAnswerParams(
  engineId: string,
  host: string,
  port: number,
  requestId: string,
  promptTokens: number,
  blockSize: number,
): Record<string, unknown> {
  const blocks = Math.ceil(promptTokens / blockSize);
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: Array.from({ length: blocks }, (_, i) => i),
    remote_engine_id: engineId,
    remote_host: host,
    remote_port: port,
    remote_request_id: requestId,
    tp_size: 1,
  };
}

/**
 * Asks a prefill worker about a room (SGLang's bootstrap server, or vLLM's transfer id on its
 * HTTP port); resolves when it is ready, rejects with the reason otherwise.
 */
export async function awaitHandoff(
  url: string,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<void> {
  const timeout = AbortSignal.timeout(timeoutMs + 1000);
  let res: Response;
  try {
    res = await fetch(`${url}?timeout_ms=${timeoutMs}`, {
      signal: AbortSignal.any([signal, timeout]),
    });
  } catch (err) {
    throw new Error(
      `the prefill worker's bootstrap server at ${url} is not reachable (${(err as Error).message})`,
    );
  }
  await res.arrayBuffer().catch(() => {});
  if (res.status === 200) return;
  throw new Error(
    res.status === 409
      ? `the prefill of ${url} failed`
      : `the prefill of ${url} did not finish within ${timeoutMs} ms`,
  );
}

/** The KV blocks of a prompt arrive: the decode worker's cache holds them (nothing to prefill). */
export function receiveKv(kv: PrefixKvCache, prompt: readonly number[]): void {
  const alloc = kv.allocate(prompt, prompt.length);
  if (alloc === undefined) return; // no room: the engine computes it, as a real decode would refuse
  kv.commit(alloc, prompt, prompt.length);
  kv.release(alloc);
}
