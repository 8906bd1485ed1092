/** The Redis keys one fleet's replicas share, all under --state-key-prefix. */
export interface StateKeys {
  /** Stream of index and membership operations (XADD ... MAXLEN ~ --state-stream-length). */
  readonly ops: string;
  /** Hash: canonical worker URL → JSON {added_at}; the current set, loaded by a starting replica. */
  readonly workers: string;
  /** Set of replica ids that have published load; members whose load key expired are removed. */
  readonly replicas: string;
  /** String per replica: JSON {worker id: own in-flight}, with a TTL of 3 load intervals. */
  load(replicaId: string): string;
  /** String: the fleet's signed index snapshot (state/snapshot.ts), refreshed by one replica at a time. */
  readonly snapshot: string;
  /** String with a TTL: the replica writing the snapshot this interval (SET NX). */
  readonly snapshotLock: string;
  /** String per new prefix (a digest): the worker id of its first claim, with a short TTL. */
  claim(digest: string): string;
}

export function stateKeys(prefix: string): StateKeys {
  return {
    ops: `${prefix}:ops`,
    workers: `${prefix}:workers`,
    replicas: `${prefix}:replicas`,
    snapshot: `${prefix}:snapshot`,
    snapshotLock: `${prefix}:snapshot:lock`,
    load: (replicaId) => `${prefix}:load:${replicaId}`,
    claim: (digest) => `${prefix}:claim:${digest}`,
  };
}
