import type { WorkerRegistry } from "./registry.js";

/**
 * The message of a 503 no_workers_available when the fleet as a whole has no worker to offer
 * (none registered, or none available). The data plane and GET /v1/models say the same thing,
 * so a client or operator sees one explanation whichever endpoint it called.
 */
export function noAvailableWorkerMessage(registry: WorkerRegistry): string {
  const total = registry.size;
  if (total === 0) {
    return "No workers are registered; add one with POST /workers or start with --worker-urls.";
  }
  return `None of the ${total} registered workers is available (unhealthy, circuit open or cooling down after Retry-After).`;
}
