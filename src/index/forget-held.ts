import type { PrefixIndex } from "./prefix-index.js";

/**
 * Forgets everything `index` holds for the worker, keeping the worker (and its budget): each text
 * it holds is truncated to nothing. Through the publishing layers (state/publishing-index.ts)
 * those truncates reach the peer replicas too, so a dead worker is purged fleet-wide. An index
 * that cannot list what it holds drops the worker and adds it back. Returns the characters dropped.
 */
export function forgetHeld(index: PrefixIndex, workerId: string): number {
  const held = index.paths?.(workerId, Number.MAX_SAFE_INTEGER);
  if (held === undefined) {
    const size = index.size(workerId);
    index.removeWorker(workerId);
    index.addWorker(workerId);
    return size;
  }
  let forgotten = 0;
  for (const { model, text } of held) forgotten += index.truncate(workerId, model, text, 0);
  return forgotten;
}
