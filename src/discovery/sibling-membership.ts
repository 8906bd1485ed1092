import type { Logger } from "../logger.js";
import type { SiblingState } from "../state/sibling-state.js";
import type { WorkerMembership } from "./membership.js";
import { workerSpecFields, workerSpecFrom } from "./worker-spec.js";

/**
 * radixgate-cluster without --state-url: a worker added or removed through one process's admin
 * API is added or removed in every process (docs/architecture.md "One process per core"). The
 * change travels over the local channel, the primary keeps the last one per worker and replays
 * them to a process that starts later; each sibling applies it through the same membership path
 * as the admin API and discovery (checks, then a health probe before the worker takes traffic).
 * With --state-url this is not set up: membership travels through Redis (state/membership-sync.ts).
 */
export function shareAdminMembership(
  membership: WorkerMembership,
  siblings: SiblingState,
  logger: Logger,
): void {
  membership.onAdminChange((change) =>
    siblings.sendMembership(
      change.kind === "add"
        ? { kind: "add", url: change.spec.url, fields: workerSpecFields(change.spec) }
        : change,
    ),
  );
  // The newest change per URL while an add is under way: a remove meanwhile undoes the add.
  const latest = new Map<string, symbol>();
  siblings.onMembership(async (change) => {
    if (change.kind === "remove") {
      latest.delete(change.url);
      membership.remove(change.url, "sibling");
      return;
    }
    const spec = workerSpecFrom(change.fields, "a sibling's worker must have a url");
    const token = Symbol(change.url);
    latest.set(change.url, token);
    try {
      await membership.add(spec, "sibling");
    } catch (err) {
      // Already here (--worker-urls, a replay of what this process has) or refused: as before.
      logger.debug(
        { url: change.url, err: (err as Error).message },
        "a sibling's worker not added",
      );
      return;
    } finally {
      if (latest.get(change.url) === token) latest.delete(change.url);
      else if (!latest.has(change.url)) membership.remove(change.url, "sibling");
    }
  });
}
