import { hostname, networkInterfaces } from "node:os";

/** Where the router listens, to recognise a worker URL that points back at it. */
export interface ListenAddress {
  host: string;
  port: number;
}

const ANY = new Set(["0.0.0.0", "::", "[::]", "", "::ffff:0:0"]);

/**
 * Whether a canonical worker URL is the router's own listen address: same port, and a host that
 * reaches this process (the unspecified address 0.0.0.0 / :: in any spelling, a loopback spelling, one of this machine's interface addresses or its
 * hostname when listening on 0.0.0.0/::, or the very address it listens on). Names are not
 * resolved through DNS; a loop through a name, a proxy or a port mapping is caught in flight by
 * the Via hop marker instead (proxy/forward.ts).
 */
export function isSelfAddress(normalizedUrl: string, listen: ListenAddress): boolean {
  const url = new URL(normalizedUrl);
  const port = url.port !== "" ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  if (port !== listen.port) return false;
  const host = bare(url.hostname);
  const listenHost = bare(listen.host.toLowerCase());
  // A connection to the unspecified address (http://0:port) goes to this machine's listeners.
  if (ANY.has(host)) return true;
  if (ANY.has(listenHost)) return isLoopbackHost(host) || ANY.has(host) || localNames().has(host);
  if (host === listenHost) return true;
  return isLoopbackHost(listenHost) && isLoopbackHost(host);
}

function bare(host: string): string {
  return host.startsWith("[") ? host.slice(1, -1) : host;
}

function isLoopbackHost(host: string): boolean {
  return (
    host === "localhost" ||
    host.endsWith(".localhost") ||
    /^127\.\d+\.\d+\.\d+$/.test(host) ||
    host === "::1" ||
    /^::ffff:127\./.test(host)
  );
}

/** This machine's interface addresses and hostname, lower-case. */
function localNames(): Set<string> {
  const names = new Set<string>([hostname().toLowerCase()]);
  for (const list of Object.values(networkInterfaces())) {
    for (const info of list ?? []) names.add(info.address.toLowerCase().replace(/%.*$/, ""));
  }
  return names;
}
