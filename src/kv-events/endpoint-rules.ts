import { isIP } from "node:net";
import type { HostResolver } from "../workers/host-lookup.js";
import { isLoopbackName } from "../workers/ip-address.js";
import { linkLocalHostReason } from "../workers/worker-url.js";

/** What a KV-event endpoint given through the admin API may be. */
export interface KvEndpointRules {
  /** --kv-events-allow-ipc: accept ipc:// (a Unix socket path on the router's machine). */
  allowIpc: boolean;
  /** --allow-link-local-workers: accept link-local and cloud metadata hosts. */
  allowLinkLocal: boolean;
  /** Resolves a host name, so a name that points at a link-local address is refused too. */
  resolveHost: HostResolver;
}

/** Below this, ports belong to system services (ssh, smtp, ...), never to an engine's publisher. */
const LOWEST_PORT = 1024;
const HOST_NAME = /^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$/i;

/**
 * Checks a ZMQ endpoint from a client (POST /workers `kv_events_endpoint`) before the router
 * connects to it, by the worker-URL rules: `tcp://host:port` with a host name or IP (no wildcard,
 * no interface or source-address form), a port in 1024–65535, no link-local or cloud metadata
 * host (in any spelling, or by what the name resolves to), and `ipc://` only behind
 * --kv-events-allow-ipc: a path lets a caller make the router connect to any local socket.
 * Returns the endpoint; throws an Error whose message says what to give.
 */
export async function checkKvEndpoint(
  raw: string,
  name: string,
  rules: KvEndpointRules,
): Promise<string> {
  if (raw.startsWith("ipc://")) {
    if (!rules.allowIpc) {
      throw new Error(
        `${name} ${raw} refused: ipc:// endpoints are accepted only with --kv-events-allow-ipc.`,
      );
    }
    if (raw.length <= "ipc://".length) throw new Error(`${name} ${raw} has no socket path.`);
    return raw;
  }
  const match = /^tcp:\/\/(\[[0-9a-f:.]+\]|[^:/[\]]+):(\d{1,5})$/i.exec(raw);
  if (!match) {
    throw new Error(
      `${name} must be a ZMQ endpoint like "tcp://10.0.0.1:5557" (or ipc:// with --kv-events-allow-ipc).`,
    );
  }
  const port = Number(match[2]);
  // The URL parser reads IPv4 as a number, in hex or octal, as getaddrinfo (ZMQ's resolver) does.
  const host = urlHost(match[1] as string);
  const bare = host?.startsWith("[") ? host.slice(1, -1) : host;
  if (host === undefined || bare === undefined || (isIP(bare) === 0 && !HOST_NAME.test(bare))) {
    throw new Error(`${name} ${raw}: "${match[1]}" is not a host name or IP address.`);
  }
  if (port < LOWEST_PORT || port > 65535) {
    throw new Error(
      `${name} ${raw}: port ${port} is outside ${LOWEST_PORT}–65535 (an engine's KV-event publisher, e.g. 5557).`,
    );
  }
  if (!rules.allowLinkLocal) {
    let reason = linkLocalHostReason(host);
    if (reason === undefined && isIP(bare) === 0 && !isLoopbackName(bare)) {
      for (const address of await rules.resolveHost(bare)) {
        const why = linkLocalHostReason(address);
        if (why !== undefined) reason = `${bare} resolves to ${why}`;
      }
    }
    if (reason !== undefined) {
      throw new Error(
        `${name} ${raw} refused: ${reason}. Start the router with --allow-link-local-workers if this really is an engine.`,
      );
    }
  }
  return raw;
}

function urlHost(host: string): string | undefined {
  try {
    return new URL(`http://${host}`).hostname.replace(/\.$/, "");
  } catch {
    return undefined;
  }
}
