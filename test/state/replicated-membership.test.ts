import { describe, expect, it } from "vitest";
import { createLogger } from "../../src/logger.js";
import { ClusterTransport } from "../../src/state/cluster-transport.js";
import { Replication } from "../../src/state/replication.js";
import { SiblingHub } from "../../src/state/sibling-hub.js";
import type { SiblingTransport } from "../../src/state/sibling-link.js";
import type { SiblingMessage } from "../../src/state/sibling-messages.js";
import { WorkerRegistry } from "../../src/workers/registry.js";
import type { Worker } from "../../src/workers/worker.js";
import { waitFor } from "../helpers/router.js";

const logger = createLogger({ level: "silent" });

/** A radixgate-cluster process in this test: its registry, its replicated membership, what it sent. */
async function process_(hub: SiblingHub, id: number) {
  let listener: (raw: unknown) => void = () => {};
  const sent: SiblingMessage[] = [];
  const transport: SiblingTransport = {
    connected: true,
    send(message) {
      sent.push(message);
      queueMicrotask(() => hub.receive(id, message));
      return true;
    },
    onMessage(l) {
      listener = l;
    },
    onClose() {},
  };
  hub.add(id, (message) => queueMicrotask(() => listener(message)));
  const registry = new WorkerRegistry({
    breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 1 },
    connectTimeoutMs: 1000,
  });
  const state = new ClusterTransport(
    transport,
    { claimTimeoutMs: 50, claimTtlMs: 2000, queueSize: 100 },
    logger,
  );
  const remoteAdds: Worker[] = [];
  const replication = new Replication([state], {
    registry,
    logger,
    onRemoteAdd: (w) => remoteAdds.push(w),
  });
  replication.attach();
  await state.start();
  return { registry, state, sent, remoteAdds };
}

describe("the worker set over radixgate-cluster's channel (one path with Redis)", () => {
  it("every add and remove of a process's registry, whatever made it, reaches the others, applied once and not sent back", async () => {
    const hub = new SiblingHub();
    const one = await process_(hub, 1);
    const two = await process_(hub, 2);
    try {
      // As a discovery source or --worker-urls adds it: straight into the registry.
      const url = "http://127.0.0.1:9001";
      one.registry.add(url, {
        apiKey: "its-own-key",
        role: { type: "decode", bootstrapPort: null },
      });
      await waitFor(() => two.registry.get(url) !== undefined, 5000, "process 2 adds it");
      const added = two.registry.get(url)!;
      expect(added.role.type).toBe("decode");
      expect(two.registry.ownApiKey(added)).toBe("its-own-key");
      // Probed by process 2 before it takes traffic there; not sent back by it.
      expect(two.remoteAdds.map((w) => w.url)).toEqual([url]);
      expect(two.sent.filter((m) => m.t === "member")).toEqual([]);
      one.registry.remove(url);
      await waitFor(() => two.registry.get(url) === undefined, 5000, "process 2 removes it");
      expect(two.sent.filter((m) => m.t === "member")).toEqual([]);
      // A process started later gets the set as it is now.
      one.registry.add("http://127.0.0.1:9002");
      await waitFor(() => two.registry.get("http://127.0.0.1:9002") !== undefined, 5000, "added");
      const three = await process_(hub, 3);
      try {
        expect(three.registry.list().map((w) => w.url)).toEqual(["http://127.0.0.1:9002"]);
      } finally {
        three.state.stop();
        await three.registry.close();
      }
    } finally {
      for (const p of [one, two]) {
        p.state.stop();
        await p.registry.close();
      }
    }
  });
});
