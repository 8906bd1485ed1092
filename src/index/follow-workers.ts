import type { PrefixIndex } from "./prefix-index.js";

/** A worker as the index sees it come and go (workers/worker.ts Worker has these). */
export interface IndexedWorker {
  readonly id: string;
  /** Where the worker reads the characters the index holds for it (GET /workers, /metrics). */
  countIndexedCharsWith(source: () => number): void;
}

/** Who announces workers added and removed (workers/registry.ts WorkerRegistry.onChange). */
export interface WorkerEvents {
  onChange(listener: (event: "added" | "removed", worker: IndexedWorker) => void): void;
}

/**
 * Makes the index track exactly the registered workers: a worker is added to the index when the
 * registry adds it, and its entries are dropped when the registry removes it. The registry emits,
 * the index subscribes, so neither folder imports the other. Subscribe right after the registry is
 * made, before any other listener, so that every listener sees the index already up to date.
 */
export function followWorkers(
  index: Pick<PrefixIndex, "addWorker" | "removeWorker" | "size">,
  members: WorkerEvents,
): void {
  members.onChange((event, worker) => {
    if (event === "removed") {
      index.removeWorker(worker.id);
      return;
    }
    const id = worker.id;
    index.addWorker(id);
    worker.countIndexedCharsWith(() => index.size(id));
  });
}
