import { Counter, Gauge, Histogram, type Registry } from "prom-client";

/** Seconds: a claim or an op on one host takes a fraction of a ms, under load tens of ms. */
const LAG_BUCKETS = [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1];

/** Metrics of the shared state (--state-url), registered only when it is on. */
export class StateMetrics {
  readonly published: Counter<never>;
  readonly publishedBytes: Counter<never>;
  readonly applied: Counter<never>;
  readonly dropped: Counter<never>;
  readonly rejected: Counter<"reason">;
  readonly resets: Counter<never>;
  readonly claims: Counter<"outcome">;
  readonly claimSeconds: Histogram<never>;
  readonly opDelaySeconds: Histogram<never>;
  readonly relays: Counter<"outcome">;

  constructor(
    registry: Registry,
    read: { connected: () => boolean; pending: () => number; leads: () => boolean },
  ) {
    const registers = [registry];
    new Gauge({
      name: "radixgate_state_leader",
      help: "1 while this replica decides for its peers (every replica sets --state-advertise-url and this one started first): they relay their requests here; 0 while it defers to another or decides apart.",
      registers,
      collect() {
        this.set(read.leads() ? 1 : 0);
      },
    });
    new Gauge({
      name: "radixgate_state_connected",
      help: "1 while this replica is connected to the shared-state Redis (--state-url).",
      registers,
      collect() {
        this.set(read.connected() ? 1 : 0);
      },
    });
    new Gauge({
      name: "radixgate_state_publish_queue",
      help: "Routing and membership updates waiting to be published to Redis.",
      registers,
      collect() {
        this.set(read.pending());
      },
    });
    this.published = new Counter({
      name: "radixgate_state_ops_published_total",
      help: "Routing and membership updates published to the other replicas.",
      registers,
    });
    this.publishedBytes = new Counter({
      name: "radixgate_state_published_bytes_total",
      help: "Payload bytes (field names and values) of the updates published.",
      registers,
    });
    this.applied = new Counter({
      name: "radixgate_state_ops_applied_total",
      help: "Updates from other replicas applied to this replica's index and worker set.",
      registers,
    });
    this.dropped = new Counter({
      name: "radixgate_state_ops_dropped_total",
      help: "Updates dropped because the publish queue was full (Redis slow or down).",
      registers,
    });
    this.rejected = new Counter({
      name: "radixgate_state_ops_rejected_total",
      help: "Entries read from Redis (ops stream, workers hash) and refused: unsigned, bad_signature (not signed with this --state-secret), oversize (e.g. a text over --state-max-text-chars), unreadable, replayed (a signed op written again: not after its writer's last one) or stale (a worker change, or workers-hash value, older than --state-max-op-age-ms).",
      labelNames: ["reason"],
      registers,
    });
    this.resets = new Counter({
      name: "radixgate_state_stream_resets_total",
      help: "Times the ops stream was found deleted or behind the last entry read (Redis lost data, a failover, a foreign write) and was read again from its start.",
      registers,
    });
    this.claims = new Counter({
      name: "radixgate_state_claims_total",
      help: "New-prefix claims by outcome: won (this replica's choice), followed (another claim was first), timeout, error, skipped (too many waiting).",
      labelNames: ["outcome"],
      registers,
    });
    this.claimSeconds = new Histogram({
      name: "radixgate_state_claim_seconds",
      help: "Round trip of a new-prefix claim that was asked (won, followed, error, or its timeout): how long the decision waited for the replicas' meeting place.",
      buckets: LAG_BUCKETS,
      registers,
    });
    this.opDelaySeconds = new Histogram({
      name: "radixgate_state_op_delay_seconds",
      help: "From a peer's sending of a routing decision (its op's signed time) to this replica applying it: how long the peers' decisions stay unseen here. Across hosts it includes the hosts' clock offset.",
      buckets: LAG_BUCKETS,
      registers,
    });
    this.relays = new Counter({
      name: "radixgate_state_relays_total",
      help: "Requests this replica sent to the leader replica (--state-advertise-url; every request with --state-relay decisions or all, those starting a new prefix with new-prefixes), by outcome: relayed (the leader took it), fallback (unreachable, refused or silent for --state-relay-timeout-ms: decided here, with a claim).",
      labelNames: ["outcome"],
      registers,
    });
  }
}
