import { describe, expect, it } from "vitest";
import { DiscoveredWorkers } from "../../src/discovery/discovered-workers.js";
import type { WorkerMembership } from "../../src/discovery/membership.js";
import type { WorkerSpec } from "../../src/discovery/worker-spec.js";
import { createLogger } from "../../src/logger.js";
import type { Worker } from "../../src/workers/worker.js";

describe("a discovery source's large answer", () => {
  it("is read in slices: requests are served between them, from its first URLs on", async () => {
    let read = 0;
    const specs = Array.from({ length: 2000 }, (_, i) => {
      const url = `http://203.0.113.${(i % 250) + 1}:${20000 + i}`;
      return {
        get url() {
          read += 1;
          return url;
        },
      } as WorkerSpec;
    });
    const joined: string[] = [];
    const membership = {
      add: async (spec: WorkerSpec) => {
        joined.push(spec.url);
        return { removed: false } as Worker;
      },
    } as unknown as WorkerMembership;
    const source = new DiscoveredWorkers(membership, "file", 0, createLogger({ level: "silent" }));
    const applied = source.apply(specs);
    // The next turn of the event loop comes before the 2,000 URLs are all read (at once, they
    // held it 90-290 ms).
    await new Promise((resolve) => setImmediate(resolve));
    expect(read).toBeGreaterThan(0);
    expect(read).toBeLessThan(specs.length);
    source.close();
    await applied;
    expect(joined.length).toBeLessThan(specs.length);
  });
});
