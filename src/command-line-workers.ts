import type { PrefillEntry } from "./disaggregation/settings.js";
import type { WorkerRegistry } from "./workers/registry.js";
import { DECODE_ROLE, prefillRole, REGULAR_ROLE, type WorkerRole } from "./workers/worker-role.js";

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
    readonly prefill: readonly PrefillEntry[];
    readonly decode: readonly string[];
  },
): Promise<void> {
  const apiKey = config.workerApiKey === undefined ? config.apiKey : undefined;
  // --prefill URL [BOOTSTRAP_PORT] and --decode URL (disaggregation/settings.ts): the same path.
  const workers: { url: string; role: WorkerRole }[] = [
    ...config.workerUrls.map((url) => ({ url, role: REGULAR_ROLE })),
    ...config.prefill.map((p) => ({ url: p.url, role: prefillRole(p.bootstrapPort) })),
    ...config.decode.map((url) => ({ url, role: DECODE_ROLE })),
  ];
  const resolved = await Promise.all(workers.map((w) => registry.resolveAddresses(w.url)));
  for (const [i, { url, role }] of workers.entries()) {
    const addresses = resolved[i] ?? [];
    registry.add(url, {
      ...(apiKey !== undefined ? { apiKey } : {}),
      ...(addresses.length > 0 ? { addresses } : {}),
      role,
    });
  }
}
