import { describe, expect, it } from "vitest";
import { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { SharedIndex } from "../../src/index/shared-index.js";
import {
  applySnapshot,
  readSnapshot,
  SnapshotRefused,
  writeSnapshot,
} from "../../src/state/snapshot.js";
import { StateSecret } from "../../src/state/state-secret.js";

const secret = new StateSecret("the snapshot tests' shared secret");
const write = (index: PrefixIndex, workers: string[], maxBytes = 1 << 20) =>
  writeSnapshot(index, workers, {
    secret,
    scope: "fleet:snapshot",
    writer: "r1",
    stream: "5-0",
    maxBytes,
  });
const read = (data: Buffer, over: Partial<Parameters<typeof readSnapshot>[1]> = {}) =>
  readSnapshot(data, {
    secret,
    scope: "fleet:snapshot",
    maxAgeMs: 60_000,
    maxBytes: 1 << 20,
    ...over,
  });

function filled(index: PrefixIndex): void {
  index.addWorker("w1");
  index.addWorker("w2");
  const system = "You are a helpful assistant. ".repeat(20);
  for (let i = 0; i < 30; i++)
    index.insert(i % 2 ? "w1" : "w2", undefined, `${system}question ${i}`);
  index.insert("w1", "llama", `${system}for llama`);
  index.insert("w2", "qwen", "😀 surrogate pairs survive");
}

async function restored(make: () => PrefixIndex, data: Buffer): Promise<PrefixIndex> {
  const target = make();
  target.addWorker("w1");
  target.addWorker("w2");
  const { body } = await read(data);
  await applySnapshot(
    body,
    { known: (id) => id !== "gone", insert: (id, m, t) => target.insert(id, m, t) },
    1 << 20,
  );
  return target;
}

describe.each([
  ["approx", () => new ApproximateIndex()],
  ["shared", () => new SharedIndex()],
] as const)("index snapshot of the %s index", (_name, make) => {
  it("loads back into an index that matches every text as the original did", async () => {
    const original = make();
    filled(original);
    const copy = await restored(make, await write(original, ["w1", "w2"]));
    for (const id of ["w1", "w2"]) expect(copy.size(id)).toBe(original.size(id));
    const probes: [string | undefined, string][] = [
      [undefined, `${"You are a helpful assistant. ".repeat(20)}question 7 and more`],
      ["llama", `${"You are a helpful assistant. ".repeat(20)}for llama!`],
      ["qwen", "😀 surrogate"],
      ["qwen", "nothing"],
    ];
    const workers = [{ id: "w1" }, { id: "w2" }];
    for (const [model, text] of probes) {
      const a = [0, 0];
      const b = [0, 0];
      original.match(text, model, workers, a);
      copy.match(text, model, workers, b);
      expect(b).toEqual(a);
    }
  });

  it("keeps the eviction order: the oldest texts go first once the budget shrinks", async () => {
    const original = make();
    original.addWorker("w1");
    for (let i = 0; i < 10; i++)
      original.insert("w1", undefined, `text number ${i} ${"x".repeat(50)}`);
    const copy = await restored(make, await write(original, ["w1"]));
    copy.setBudget("w1", 200);
    const out = [0];
    copy.match(`text number 9 ${"x".repeat(50)}`, undefined, [{ id: "w1" }], out);
    expect(out[0]).toBeGreaterThan(50);
    copy.match(`text number 0 ${"x".repeat(50)}`, undefined, [{ id: "w1" }], out);
    expect(out[0]).toBeLessThan(20);
  });
});

describe("index snapshot format", () => {
  it("is compact: texts sharing a long prefix cost about the tree's characters, not their sum", async () => {
    const index = new ApproximateIndex();
    index.addWorker("w1");
    const system = "s".repeat(10_000);
    for (let i = 0; i < 100; i++) index.insert("w1", undefined, `${system} user ${i}`);
    const data = await write(index, ["w1"]);
    expect(data.length).toBeLessThan(index.size("w1") + 100 * 40 + 1024);
  });

  it("stays within its byte bound, keeping each worker's newest texts", async () => {
    const index = new ApproximateIndex();
    index.addWorker("w1");
    for (let i = 0; i < 200; i++) index.insert("w1", undefined, `${i} ${"y".repeat(100)} ${i}`);
    const data = await write(index, ["w1"], 6000);
    expect(data.length).toBeLessThan(6000 + 512);
    const copy = new ApproximateIndex();
    copy.addWorker("w1");
    const { body } = await read(data);
    const applied = await applySnapshot(
      body,
      { known: () => true, insert: (id, m, t) => copy.insert(id, m, t) },
      1 << 20,
    );
    expect(applied.paths).toBeGreaterThan(5);
    const out = [0];
    copy.match(`199 ${"y".repeat(100)} 199`, undefined, [{ id: "w1" }], out);
    expect(out[0]).toBe(108);
  });

  it("leaves out workers unknown to the reader", async () => {
    const index = new ApproximateIndex();
    index.addWorker("gone");
    index.insert("gone", undefined, "some text");
    const { body } = await read(await write(index, ["gone"]));
    const inserted: string[] = [];
    const applied = await applySnapshot(
      body,
      { known: (id) => id !== "gone", insert: (id) => inserted.push(id) },
      100,
    );
    expect(applied).toMatchObject({ workers: 0, paths: 0, skipped: 1 });
    expect(inserted).toEqual([]);
  });

  const refusal = async (data: Buffer, over: Partial<Parameters<typeof readSnapshot>[1]> = {}) => {
    const err = await read(data, over).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SnapshotRefused);
    return (err as Error).message;
  };

  it("refuses a corrupt, foreign, replayed or oversized snapshot, saying why", async () => {
    const index = new ApproximateIndex();
    filled(index);
    const data = await write(index, ["w1", "w2"]);
    const corrupt = Buffer.from(data);
    corrupt[corrupt.length - 5] = 0x41;
    expect(await refusal(corrupt)).toMatch(/corrupt/);
    expect(await refusal(data.subarray(0, data.length - 10))).toMatch(/corrupt/);
    expect(await refusal(Buffer.from("hello\nworld\n"))).toMatch(/not a radixgate/);
    expect(await refusal(data, { secret: new StateSecret("another fleet's own secret") })).toMatch(
      /signature/,
    );
    expect(await refusal(data, { scope: "other:snapshot" })).toMatch(/signature/);
    expect(await refusal(data, { now: Date.now() + 120_000 })).toMatch(/maximum age/);
    expect(await refusal(data, { maxBytes: 100 })).toMatch(/larger/);
    const header = data.subarray(0, data.indexOf(0x0a)).toString();
    const bumped = Buffer.concat([
      Buffer.from(header.replace('"v":1', '"v":2')),
      data.subarray(header.length),
    ]);
    expect(await refusal(bumped)).toMatch(/version 2/);
  });
});
