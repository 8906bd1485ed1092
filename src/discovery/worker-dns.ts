import { promises as dns } from "node:dns";
import type { Logger } from "../logger.js";
import type { DiscoveredWorkers } from "./discovered-workers.js";
import type { WorkerSpec } from "./worker-spec.js";

/** The lookups the DNS source makes (node:dns's promises Resolver; tests inject one). */
export type DnsResolver = Pick<dns.Resolver, "resolve4" | "resolve6" | "resolveSrv" | "cancel">;

export interface WorkerDnsOptions {
  /** NAME[:PORT], as --worker-dns takes it. */
  target: string;
  intervalMs: number;
  timeoutMs: number;
  /** Default: a resolver on the system's DNS servers. */
  resolver?: DnsResolver;
}

/** Answers that say "no such records" (an answer, not a failure). */
const NO_RECORDS = new Set(["ENOTFOUND", "ENODATA"]);
/** At most this many workers from one name, so a huge answer cannot grow the fleet unbounded. */
const MAX_DNS_WORKERS = 1024;

/** Splits NAME[:PORT]. */
export function parseDnsTarget(target: string): { name: string; port: number | undefined } {
  const match = /^(.*?)(?::(\d+))?$/.exec(target.trim());
  const name = (match?.[1] ?? target).replace(/\.$/, "");
  return { name, port: match?.[2] === undefined ? undefined : Number(match[2]) };
}

/**
 * --worker-dns: the workers are the name's SRV targets (each target's addresses, the record's
 * port) when it has SRV records, else its A and AAAA addresses on the given port; looked up again
 * every interval, each lookup bounded. A failed lookup (timeout, server failure) keeps the last
 * answer; "no such name/records" is an answer, and its workers drain.
 */
export class WorkerDnsSource {
  private readonly name: string;
  private readonly port: number | undefined;
  private readonly resolver: DnsResolver;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly options: WorkerDnsOptions,
    private readonly workers: DiscoveredWorkers,
    private readonly logger: Logger,
  ) {
    ({ name: this.name, port: this.port } = parseDnsTarget(options.target));
    this.resolver = options.resolver ?? new dns.Resolver({ timeout: options.timeoutMs, tries: 2 });
  }

  /** Looks the name up once (its workers' health checks included), then every interval. */
  async start(): Promise<void> {
    await this.refresh();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.resolver.cancel();
  }

  /** One lookup, applied unless it failed. */
  async refresh(): Promise<void> {
    let specs: WorkerSpec[];
    try {
      specs = await this.lookUp();
    } catch (err) {
      const e = err as { code?: string; message?: string };
      this.logger.warn(
        { source: "dns", name: this.name, reason: e.code ?? e.message },
        "worker DNS lookup failed: the last answer stands",
      );
      return;
    }
    if (this.stopped) return;
    await this.workers.apply(specs);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.refresh().finally(() => this.schedule());
    }, this.options.intervalMs);
    this.timer.unref();
  }

  private async lookUp(): Promise<WorkerSpec[]> {
    const srv = await this.bounded(this.resolver.resolveSrv(this.name));
    const urls: string[] = [];
    if (srv.length > 0) {
      for (const record of srv) {
        const addresses = await this.addresses(record.name);
        for (const address of addresses) urls.push(workerUrl(address, record.port));
      }
    } else {
      const addresses = await this.addresses(this.name);
      if (addresses.length > 0 && this.port === undefined) {
        throw new Error(
          `${this.name} has no SRV records: give the workers' port as --worker-dns ${this.name}:PORT`,
        );
      }
      for (const address of addresses) urls.push(workerUrl(address, this.port ?? 0));
    }
    if (urls.length > MAX_DNS_WORKERS) {
      this.logger.warn(
        { source: "dns", name: this.name, answers: urls.length, kept: MAX_DNS_WORKERS },
        "worker DNS answer too large: the first ones kept",
      );
    }
    return [...new Set(urls)].slice(0, MAX_DNS_WORKERS).map((url) => ({ url }));
  }

  /** A and AAAA addresses of a name (none when it has none). */
  private async addresses(name: string): Promise<string[]> {
    const [v4, v6] = await Promise.all([
      this.bounded(this.resolver.resolve4(name)),
      this.bounded(this.resolver.resolve6(name)),
    ]);
    return [...v4, ...v6];
  }

  /** One lookup under the timeout; "no records" answers as an empty list. */
  private async bounded<T>(lookup: Promise<T[]>): Promise<T[]> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const error: NodeJS.ErrnoException = new Error(
          `no answer within ${this.options.timeoutMs} ms`,
        );
        error.code = "ETIMEOUT";
        reject(error);
      }, this.options.timeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([lookup, timeout]);
    } catch (err) {
      if (NO_RECORDS.has((err as { code?: string }).code ?? "")) return [];
      throw err;
    } finally {
      clearTimeout(timer);
      lookup.catch(() => {});
    }
  }
}

function workerUrl(address: string, port: number): string {
  return `http://${address.includes(":") ? `[${address}]` : address}:${port}`;
}
