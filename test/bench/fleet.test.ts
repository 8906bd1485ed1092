import { describe, expect, it } from "vitest";
import { childFleetHost, fleetWorkerOptions, inlineFleetHost } from "../../bench/lib/fleet.js";

async function chat(url: string): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
  });
  await res.arrayBuffer();
  return res.status;
}

describe("bench fleets of simulated workers", () => {
  it("numbers workers w1..wN and gives them consecutive ports when asked", () => {
    const opts = fleetWorkerOptions({ count: 3, basePort: 31001, worker: { timeScale: 0.5 } });
    expect(opts.map((o) => [o.id, o.port, o.timeScale])).toEqual([
      ["w1", 31001, 0.5],
      ["w2", 31002, 0.5],
      ["w3", 31003, 0.5],
    ]);
    expect(fleetWorkerOptions({ count: 2 }).map((o) => o.port)).toEqual([0, 0]);
    expect(() => fleetWorkerOptions({ count: 0 })).toThrow(RangeError);
  });

  it("in a child process: serves, reports each worker's counters, and closes", async () => {
    const host = await childFleetHost();
    try {
      const fleet = await host.startFleet({ count: 2, worker: { timeScale: 0.01 } });
      expect(fleet.workers.map((w) => w.id)).toEqual(["w1", "w2"]);
      expect(await chat(fleet.workers[1]!.url)).toBe(200);
      const stats = await fleet.stats();
      expect(stats.map((s) => s.requests)).toEqual([0, 1]);
      // A second fleet in the same process starts cold, with the same ids.
      const second = await host.startFleet({ count: 2, worker: { timeScale: 0.01 } });
      expect((await second.stats()).map((s) => s.requests)).toEqual([0, 0]);
      await fleet.close();
      await expect(fetch(`${fleet.workers[0]!.url}/health`)).rejects.toThrow();
      expect(await chat(second.workers[0]!.url)).toBe(200);
    } finally {
      await host.close();
    }
  });

  it("in this process: the same interface", async () => {
    const host = inlineFleetHost();
    const fleet = await host.startFleet({ count: 1, worker: { timeScale: 0.01 } });
    expect(await chat(fleet.workers[0]!.url)).toBe(200);
    expect((await fleet.stats())[0]?.requests).toBe(1);
    await host.close();
    await expect(fetch(`${fleet.workers[0]!.url}/health`)).rejects.toThrow();
  });
});
