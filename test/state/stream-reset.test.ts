import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { compareIds } from "../../src/state/ops-reader.js";
import { redisSkipReason } from "../helpers/redis.js";
import { replicaFleet } from "../helpers/replica-fleet.js";
import { postJson, waitFor } from "../helpers/router.js";

describe("stream ids", () => {
  it("compare by milliseconds then sequence, beyond 2^53", () => {
    expect(compareIds("1-0", "1-0")).toBe(0);
    expect(compareIds("2-0", "10-0")).toBe(-1);
    expect(compareIds("5-10", "5-9")).toBe(1);
    expect(compareIds("18446744073709551615-0", "18446744073709551614-99")).toBe(1);
  });
});

// Issue 20 item 4: after an entry far in the future and the stream's deletion, a replica stopped
// applying its peers' ops while radixgate_state_connected stayed 1.
describe.skipIf(redisSkipReason !== undefined)(
  `a reset or rewound ops stream${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
  () => {
    const fleet = replicaFleet(2);
    const { replica } = fleet;
    const decide = async (router: RunningRouter, topic: string) => {
      const res = await postJson(`${router.url}/v1/completions`, {
        model: "m",
        prompt: `${topic}: ${"a long shared preamble. ".repeat(20)}`,
        max_tokens: 2,
      });
      expect(res.status).toBe(200);
      const worker = res.headers.get("x-radixgate-worker")!;
      await res.text();
      return worker;
    };
    /** Waits until B's index holds more for `worker` than `before`. */
    const applied = (b: RunningRouter, worker: string, before: number, what: string) =>
      waitFor(() => b.context.index.size(worker) > before, 10_000, what);

    it("an entry with an ID far in the future, then the stream deleted: the reader notices, reads again and counts it", async () => {
      const prefix = `t${randomBytes(4).toString("hex")}`;
      const a = await replica(prefix);
      const b = await replica(prefix);
      // Someone with write access (or a primary with a clock far ahead) writes an entry from 2286.
      await fleet.redis.client.xadd(`${prefix}:ops`, "9999999999999-0", "junk", "1");
      // Entries after it continue from its ID: B reads on past it.
      const first = await decide(a, "before the reset");
      await applied(b, first, 0, "B applies A's decision after the future entry");
      // The stream is deleted (DEL, or Redis restarted empty): new IDs are far below B's last one.
      await fleet.redis.client.del(`${prefix}:ops`);
      const before = new Map(
        b.context.registry.list().map((w) => [w.id, b.context.index.size(w.id)]),
      );
      const second = await decide(a, "after the reset");
      await applied(b, second, before.get(second)!, "B applies A's decision after the reset");
      const metrics = await (await fetch(`${b.url}/metrics`)).text();
      expect(metrics).toMatch(/^radixgate_state_stream_resets_total 1$/m);
      expect(metrics).toMatch(/^radixgate_state_connected 1$/m);
    }, 30_000);

    it("a stream replaced at once by one whose IDs are behind (a failover from a primary whose clock ran a minute ahead) is read again from its start", async () => {
      const prefix = `t${randomBytes(4).toString("hex")}`;
      const a = await replica(prefix);
      const b = await replica(prefix);
      // The old primary's clock runs a minute ahead: its entries carry IDs from the future.
      const ahead = Date.now() + 60_000;
      await fleet.redis.client.xadd(`${prefix}:ops`, `${ahead}-0`, "junk", "1");
      const first = await decide(a, "on the old primary");
      await applied(b, first, 0, "B follows the stream");
      // Failover: the new primary's stream never disappears, it simply ends at its own clock.
      await fleet.redis.client
        .multi()
        .del(`${prefix}:ops`)
        .xadd(`${prefix}:ops`, `${Date.now()}-0`, "junk", "1")
        .exec();
      const before = new Map(
        b.context.registry.list().map((w) => [w.id, b.context.index.size(w.id)]),
      );
      const second = await decide(a, "on the new primary");
      await applied(b, second, before.get(second)!, "B applies A's decision in the rewound stream");
      const metrics = await (await fetch(`${b.url}/metrics`)).text();
      expect(metrics).toMatch(/^radixgate_state_stream_resets_total 1$/m);
    }, 30_000);
  },
);
