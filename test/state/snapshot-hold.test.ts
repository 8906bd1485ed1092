import { describe, expect, it, vi } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import { followWorkers } from "../../src/index/follow-workers.js";
import { createLogger } from "../../src/logger.js";
import { loadSnapshot, writeSnapshot } from "../../src/state/snapshot.js";
import { StateSecret } from "../../src/state/state-secret.js";

const secret = new StateSecret("the snapshot hold tests' secret");
const silent = createLogger({ level: "silent" });
const system = "You are a helpful assistant. ".repeat(20);

type Listener = (event: "added" | "removed", worker: { id: string }) => void;

/** A registry in miniature: the index follows it, as index/follow-workers.ts wires the real one. */
function members(initial: string[]) {
  const ids = new Set(initial);
  const listeners: Listener[] = [];
  const index = new ApproximateIndex();
  const m = {
    index,
    get: (id: string) => (ids.has(id) ? { id } : undefined),
    onChange: (listener: Listener) => listeners.push(listener),
    add(id: string) {
      ids.add(id);
      for (const l of listeners) l("added", { id, countIndexedCharsWith: () => {} } as never);
    },
  };
  followWorkers(index, {
    onChange: (l) => m.onChange(l as Listener),
  });
  for (const id of initial) index.addWorker(id);
  return m;
}

async function snapshotOf(workers: Record<string, string[]>): Promise<Buffer> {
  const source = new ApproximateIndex();
  for (const [id, texts] of Object.entries(workers)) {
    source.addWorker(id);
    for (const text of texts) source.insert(id, undefined, text);
  }
  return writeSnapshot(source, Object.keys(workers), {
    secret,
    scope: "fleet:snapshot",
    writer: "r1",
    stream: "",
    maxBytes: 1 << 20,
  });
}

const load = (data: Buffer, m: ReturnType<typeof members>, maxBytes = 1 << 20) =>
  loadSnapshot(
    data,
    { secret, scope: "fleet:snapshot", maxAgeMs: 60_000, maxBytes },
    m.index,
    m,
    silent,
  );

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe("a snapshot's entries for workers that register after the load", () => {
  it("are held and applied when the worker registers", async () => {
    const data = await snapshotOf({
      w1: [`${system}billing`],
      w2: [`${system}shipping`, `${system}returns`],
    });
    const m = members(["w1"]);
    const { applied } = await load(data, m);
    expect(applied).toMatchObject({ workers: 1, paths: 1, skipped: 1, held: 2 });
    expect(m.index.size("w2")).toBe(0);
    m.add("w2");
    await settle();
    const out: number[] = [];
    m.index.match(`${system}returns and more`, undefined, [{ id: "w2" }], out);
    expect(out[0]).toBe(`${system}returns`.length);
  });

  it("are bounded: past the snapshot's size cap in characters, the rest is not held", async () => {
    const data = await snapshotOf({ w2: [`${system}a`, `${system}b`, `${system}c`] });
    const m = members([]);
    // Room for about two of the three texts.
    const { applied } = await load(data, m, 2 * (system.length + 1) + 10);
    expect(applied.held).toBe(3);
    m.add("w2");
    await settle();
    const held = [`${system}a`, `${system}b`, `${system}c`].filter((t) => {
      const o: number[] = [];
      m.index.match(t, undefined, [{ id: "w2" }], o);
      return o[0] === t.length;
    });
    expect(held).toHaveLength(2);
  });

  it("expire with the snapshot's maximum age: a worker registering later starts cold", async () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
    try {
      const data = await snapshotOf({ w2: [`${system}shipping`], w3: [`${system}returns`] });
      const m = members([]);
      const { applied } = await load(data, m);
      expect(applied.held).toBe(2);
      vi.advanceTimersByTime(59_000);
      m.add("w2");
      await settle();
      expect(m.index.size("w2")).toBeGreaterThan(0);
      // Past the maximum age (60 s) the rest is dropped.
      vi.advanceTimersByTime(1_001);
      m.add("w3");
      await settle();
      expect(m.index.size("w3")).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});
