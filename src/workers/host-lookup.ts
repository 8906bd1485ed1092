import { lookup } from "node:dns/promises";

/** Resolves a host name to every address it has now (empty when it does not resolve in time). */
export type HostResolver = (hostname: string) => Promise<string[]>;

/**
 * The system resolver (the one connections use: /etc/hosts, then DNS), bounded by `timeoutMs`.
 * A name that does not resolve yet is not an error at registration: the worker is added and its
 * health check reports it; only the addresses that do resolve are compared and checked.
 */
export function systemResolver(timeoutMs: number): HostResolver {
  return async (hostname) => {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<string[]>((resolve) => {
      timer = setTimeout(() => resolve([]), timeoutMs);
      timer.unref();
    });
    const answer = lookup(hostname, { all: true, verbatim: true })
      .then((list) => list.map((a) => a.address))
      .catch(() => [] as string[]);
    try {
      return await Promise.race([answer, timeout]);
    } finally {
      clearTimeout(timer);
    }
  };
}
