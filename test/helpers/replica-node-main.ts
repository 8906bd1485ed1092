/**
 * A process forked by test/state/replication-transports.test.ts through node:cluster: one replica
 * (test/helpers/replica-node.ts) whose transport is the cluster's real channel to the test process,
 * which plays the primary (state/cluster-hub.ts). The test's commands arrive on the same channel,
 * tagged `rpc` (the hub and the transport ignore what is not theirs); each answer goes back so.
 */
import { createLogger } from "../../src/logger.js";
import { clusterSiblingLink } from "../../src/state/cluster-channel.js";
import { ClusterTransport } from "../../src/state/cluster-transport.js";
import {
  CLAIM_TIMEOUT_ENV,
  RANK_HOLD_ENV,
  type ReplicaCommand,
  ReplicaNode,
} from "./replica-node.js";

const link = clusterSiblingLink();
if (link === undefined) throw new Error("not a process of a sharing cluster");
const node = new ReplicaNode(
  new ClusterTransport(
    link.transport,
    {
      claimTimeoutMs: Number(process.env[CLAIM_TIMEOUT_ENV] ?? 2000),
      claimTtlMs: 10_000,
      queueSize: 10_000,
      ...(link.rank !== undefined ? { rank: link.rank } : {}),
    },
    createLogger({ level: "silent" }),
  ),
  Number(process.env[RANK_HOLD_ENV] ?? 0),
);
const reply = (message: object) => process.send?.(message);
process.on("message", (raw: { rpc?: number; command?: ReplicaCommand; stop?: boolean }) => {
  if (raw?.stop === true) {
    void node.stop().finally(() => process.disconnect());
    return;
  }
  const { rpc, command } = raw ?? {};
  if (typeof rpc !== "number" || command === undefined) return;
  node.run(command).then(
    (result) => reply({ rpc, result }),
    (err: unknown) => reply({ rpc, error: (err as Error).message }),
  );
});
await node.start();
reply({ started: true });
