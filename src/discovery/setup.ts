import type { Logger } from "../logger.js";
import { DiscoveredWorkers } from "./discovered-workers.js";
import { type KubernetesDiscoveryOptions, KubernetesPodSource } from "./kubernetes-source.js";
import type { WorkerMembership } from "./membership.js";
import { type DnsResolver, WorkerDnsSource } from "./worker-dns.js";
import { WorkerFileSource } from "./worker-file.js";

export interface DiscoveryOptions {
  /** --worker-file ("" = none). */
  workerFile: string;
  /** --worker-dns ("" = none). */
  workerDns: string;
  dnsIntervalMs: number;
  dnsTimeoutMs: number;
  graceMs: number;
  /** --service-discovery: Kubernetes pods (undefined = off). */
  kubernetes?: KubernetesDiscoveryOptions;
  /** For tests: the resolver --worker-dns asks (default: the system's DNS servers). */
  dnsResolver?: DnsResolver;
}

export interface Discovery {
  stop(): void;
}

/**
 * Starts the configured discovery sources; resolves once each has applied its first answer (its
 * workers health-checked), so they take traffic from the first request on.
 */
export async function startDiscovery(
  options: DiscoveryOptions,
  membership: WorkerMembership,
  logger: Logger,
): Promise<Discovery> {
  const stops: (() => void)[] = [];
  const starts: Promise<void>[] = [];
  if (options.workerFile !== "") {
    const workers = new DiscoveredWorkers(membership, "file", options.graceMs, logger);
    const source = new WorkerFileSource(options.workerFile, workers, logger);
    stops.push(
      () => source.stop(),
      () => workers.close(),
    );
    starts.push(source.start());
  }
  if (options.workerDns !== "") {
    const workers = new DiscoveredWorkers(membership, "dns", options.graceMs, logger);
    const source = new WorkerDnsSource(
      {
        target: options.workerDns,
        intervalMs: options.dnsIntervalMs,
        timeoutMs: options.dnsTimeoutMs,
        ...(options.dnsResolver !== undefined ? { resolver: options.dnsResolver } : {}),
      },
      workers,
      logger,
    );
    stops.push(
      () => source.stop(),
      () => workers.close(),
    );
    starts.push(source.start());
  }
  if (options.kubernetes !== undefined) {
    const workers = new DiscoveredWorkers(membership, "kubernetes", options.graceMs, logger);
    stops.push(() => workers.close());
    const kubernetes = options.kubernetes;
    starts.push(
      KubernetesPodSource.start(kubernetes, workers, logger).then((source) => {
        stops.unshift(() => source.stop());
      }),
    );
  }
  try {
    await Promise.all(starts);
  } catch (err) {
    for (const stop of stops) stop();
    throw err;
  }
  return {
    stop: () => {
      for (const stop of stops) stop();
    },
  };
}
