import type { WorkerRegistry } from "./workers/registry.js";

/**
 * Registers the --worker-urls workers at start-up, in the order given. Every host name is resolved
 * at once, so start-up waits for one lookup timeout at most, not one per worker. Throws the
 * registry's RouterError for a URL it refuses.
 *
 * As SGLang's gateway does, --api-key is also the key of these workers
 * (sgl-model-gateway/src/core/job_queue.rs, Job::InitializeWorkersFromConfig; clients must send it
 * too: src/middleware.rs, auth_middleware). An explicit --worker-api-key wins: it is the registry's
 * default key (AdmissionRules.defaultApiKey), so it is not given here, where it would become these
 * workers' own key and travel to the peer replicas instead of each using its own. Workers added
 * later through the admin API bring their own key.
 */
export async function addCommandLineWorkers(
  registry: WorkerRegistry,
  config: {
    readonly workerUrls: readonly string[];
    readonly workerApiKey: string | undefined;
    readonly apiKey: string | undefined;
  },
): Promise<void> {
  const apiKey = config.workerApiKey === undefined ? config.apiKey : undefined;
  const resolved = await Promise.all(config.workerUrls.map((u) => registry.resolveAddresses(u)));
  for (const [i, url] of config.workerUrls.entries()) {
    const addresses = resolved[i] ?? [];
    registry.add(url, {
      ...(apiKey !== undefined ? { apiKey } : {}),
      ...(addresses.length > 0 ? { addresses } : {}),
    });
  }
}
