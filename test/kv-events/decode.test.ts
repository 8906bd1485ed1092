import { decode, encode } from "@msgpack/msgpack";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  encodeBatch,
  type KvEncoding,
  type WireBatch,
  type WireEvent,
} from "../../sim/kv-event-encoder.js";
import { type EngineHashes, packed } from "../../src/index/hash-list.js";
import {
  DECODE_SLICE_BYTES,
  decodeBatch,
  decodeBatchInSlices,
  decodeEnvelope,
  decodeSequence,
  END_OF_REPLAY,
  encodeSequence,
  KvDecodeError,
} from "../../src/kv-events/decode.js";
import type { EventBatch } from "../../src/kv-events/events.js";
import { MsgpackReader } from "../../src/kv-events/msgpack-reader.js";

/** Hashes in their string form: the decoder packs them (hash-list.ts); literals are strings. */
const strings = (hashes: EngineHashes) => packed(hashes).toStrings();
const plain = (batch: EventBatch): EventBatch => ({
  ...batch,
  events: batch.events.map((e) =>
    e.type === "AllBlocksCleared" ? e : { ...e, blockHashes: strings(e.blockHashes) },
  ),
});

const hex = (s: string) => Uint8Array.from(Buffer.from(s.replace(/\s+/g, ""), "hex"));
const str = (s: string) =>
  (s.length < 32 ? (0xa0 + s.length).toString(16) : "") + Buffer.from(s).toString("hex");

describe("decodeBatch on byte-exact samples", () => {
  it("reads the positional encoding (SGLang, vLLM before 2026): [ts, events] and tagged arrays", () => {
    // [1.5, [["BlockStored", [1, 2], null, [1..8], 4, null], ["BlockRemoved", [7]], ["AllBlocksCleared"]]]
    const bytes = hex(`
      92 cb3ff8000000000000 93
        96 ab426c6f636b53746f726564 920102 c0 980102030405060708 04 c0
        92 ac426c6f636b52656d6f766564 9107
        91 b0416c6c426c6f636b73436c6561726564`);
    expect(plain(decodeBatch(bytes))).toEqual({
      ts: 1.5,
      dataParallelRank: null,
      events: [
        {
          type: "BlockStored",
          blockHashes: ["1", "2"],
          parentHash: null,
          tokenIds: [1, 2, 3, 4, 5, 6, 7, 8],
          blockSize: 4,
          loraId: null,
          medium: null,
          loraName: null,
        },
        { type: "BlockRemoved", blockHashes: ["7"], medium: null },
        { type: "AllBlocksCleared" },
      ],
    });
  });

  it("reads the map encoding (vLLM since 2026): bytes hashes, a uint64 parent, lora_name, rank", () => {
    const bytes = hex(`
      83 ${str("ts")} cb4000000000000000 ${str("events")} 91
        88 ${str("type")} ${str("BlockStored")}
           ${str("block_hashes")} 91 c402abcd
           ${str("parent_block_hash")} cfffffffffffffffff
           ${str("token_ids")} 9409090909
           ${str("block_size")} 04
           ${str("lora_id")} c0
           ${str("medium")} ${str("GPU")}
           ${str("lora_name")} ${str("ad")}
      ${str("data_parallel_rank")} 00`);
    // The literal bytes, so a helper mistake cannot hide a decoder mistake.
    expect(Buffer.from(bytes).toString("hex").slice(0, 30)).toBe("83a27473cb4000000000000000a665");
    expect(plain(decodeBatch(bytes))).toEqual({
      ts: 2,
      dataParallelRank: 0,
      events: [
        {
          type: "BlockStored",
          blockHashes: ["xabcd"],
          parentHash: "18446744073709551615",
          tokenIds: [9, 9, 9, 9],
          blockSize: 4,
          loraId: null,
          medium: "GPU",
          loraName: "ad",
        },
      ],
    });
  });

  it("reads a negative int64 hash (Python's hash() can be negative) as its decimal form", () => {
    // [0.5, [["BlockRemoved", [-1], "GPU"]]]
    const bytes = hex(
      `92 cb3fe0000000000000 91 93 ${str("BlockRemoved")} 91 d3ffffffffffffffff ${str("GPU")}`,
    );
    expect(plain(decodeBatch(bytes)).events).toEqual([
      { type: "BlockRemoved", blockHashes: ["-1"], medium: "GPU" },
    ]);
  });

  it("takes an offloaded block named by its hash alone (vLLM's placeholder: no tokens, block size 0)", () => {
    const payload = encodeBatch(
      {
        ts: 1,
        events: [
          {
            type: "BlockStored",
            blockHashes: [7],
            parentHash: null,
            tokenIds: [],
            blockSize: 0,
            medium: "CPU",
          },
        ],
      },
      "map",
    );
    expect(plain(decodeBatch(payload)).events[0]).toMatchObject({
      blockHashes: ["7"],
      blockSize: 0,
      medium: "CPU",
    });
  });

  it.each([
    ["not msgpack", "c1"],
    ["a bare number", "01"],
    ["ts missing", `91 90`],
    ["events not a list", `92 cb3ff8000000000000 01`],
    ["unknown event type", `92 cb3ff8000000000000 91 91 ${str("Nope")}`],
    ["block_size zero", `92 cb3ff8000000000000 91 96 ${str("BlockStored")} 9101 c0 9101 00 c0`],
    ["a string hash", `92 cb3ff8000000000000 91 92 ${str("BlockRemoved")} 91 ${str("h")}`],
    ["negative token id", `92 cb3ff8000000000000 91 96 ${str("BlockStored")} 9101 c0 91ff 01 c0`],
  ])("refuses %s with KvDecodeError", (_name, bytes) => {
    expect(() => decodeBatch(hex(bytes))).toThrow(KvDecodeError);
  });
});

describe("sequence frames", () => {
  it("reads 8 big-endian bytes, -1 as the end of a replay", () => {
    expect(decodeSequence(hex("0000000000000102"))).toBe(258n);
    expect(decodeSequence(hex("ffffffffffffffff"))).toBe(END_OF_REPLAY);
    expect(decodeSequence(encodeSequence(123456789n))).toBe(123456789n);
    expect(() => decodeSequence(hex("0102"))).toThrow(KvDecodeError);
  });

  it("decodes a [topic, sequence, payload] message and refuses other frame counts", () => {
    const payload = encodeBatch({ ts: 1.25, events: [{ type: "AllBlocksCleared" }] }, "array");
    const message = decodeEnvelope([Buffer.from("kv"), encodeSequence(5n), payload]);
    expect(message).toEqual({ sequence: 5n, payload });
    expect(decodeBatch(message.payload)).toEqual({
      ts: 1.25,
      events: [{ type: "AllBlocksCleared" }],
      dataParallelRank: null,
    });
    expect(() => decodeEnvelope([payload])).toThrow(KvDecodeError);
    expect(() => decodeEnvelope([Buffer.from(""), encodeSequence(-1n), payload])).toThrow(
      KvDecodeError,
    );
  });
});

const wireHash = fc.oneof(
  fc.integer({ min: 0, max: 2 ** 31 }),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
  fc.uint8Array({ minLength: 1, maxLength: 32 }),
);
const wireEvent: fc.Arbitrary<WireEvent> = fc.oneof(
  fc.record({
    type: fc.constant("BlockStored" as const),
    blockHashes: fc.array(wireHash, { maxLength: 4 }),
    parentHash: fc.option(wireHash, { nil: null }),
    tokenIds: fc.array(fc.nat({ max: 200_000 }), { maxLength: 16 }),
    blockSize: fc.integer({ min: 1, max: 64 }),
    loraId: fc.option(fc.nat(), { nil: null }),
    medium: fc.option(fc.constantFrom("GPU", "CPU"), { nil: null }),
  }),
  fc.record({
    type: fc.constant("BlockRemoved" as const),
    blockHashes: fc.array(wireHash, { maxLength: 4 }),
    medium: fc.option(fc.constant("GPU"), { nil: null }),
  }),
  fc.constant({ type: "AllBlocksCleared" as const }),
);
const normal = (h: number | bigint | Uint8Array) =>
  h instanceof Uint8Array ? `x${Buffer.from(h).toString("hex")}` : h.toString();

describe("decoder properties", () => {
  it("round-trips every batch in both encodings", () => {
    fc.assert(
      fc.property(
        fc.array(wireEvent, { maxLength: 5 }),
        fc.constantFrom<KvEncoding>("array", "map"),
        fc.option(fc.nat({ max: 7 }), { nil: null }),
        (events, encoding, rank) => {
          const batch: WireBatch = { ts: 1700000000.25, events, dataParallelRank: rank };
          const decoded = decodeBatch(encodeBatch(batch, encoding));
          expect(decoded.dataParallelRank).toBe(rank);
          expect(decoded.events.map((e) => e.type)).toEqual(events.map((e) => e.type));
          decoded.events.forEach((e, i) => {
            const w = events[i]!;
            if (e.type === "AllBlocksCleared" || w.type === "AllBlocksCleared") return;
            expect(strings(e.blockHashes)).toEqual(w.blockHashes.map(normal));
            if (e.type === "BlockStored" && w.type === "BlockStored") {
              expect(e.parentHash).toBe(w.parentHash === null ? null : normal(w.parentHash));
              expect(e.tokenIds).toEqual(w.tokenIds);
            }
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("random bytes never throw anything but KvDecodeError", () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ maxLength: 64 }), { maxLength: 4 }), (frames) => {
        for (const attempt of [
          () => decodeBatch(decodeEnvelope(frames).payload),
          () => decodeBatch(frames[0] ?? hex("")),
        ]) {
          try {
            attempt();
          } catch (error) {
            expect(error).toBeInstanceOf(KvDecodeError);
          }
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("valid messages with one byte corrupted never throw anything but KvDecodeError", () => {
    fc.assert(
      fc.property(
        fc.array(wireEvent, { minLength: 1, maxLength: 3 }),
        fc.constantFrom<KvEncoding>("array", "map"),
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        (events, encoding, at, byte) => {
          const payload = encodeBatch({ ts: 1.5, events }, encoding).slice();
          payload[at % payload.length] = byte;
          try {
            decodeBatch(payload);
          } catch (error) {
            expect(error).toBeInstanceOf(KvDecodeError);
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe("decodeBatchInSlices", () => {
  /** One BlockStored of `blocks` 1-token blocks with 64-bit hashes, then a few small events. */
  function bigBatch(blocks: number): Uint8Array {
    const events: WireEvent[] = [
      {
        type: "BlockStored",
        blockHashes: Array.from({ length: blocks }, (_, i) => (1n << 63n) + BigInt(i) * 7919n),
        parentHash: null,
        tokenIds: Array.from({ length: blocks }, (_, i) => i % 30_000),
        blockSize: 1,
        medium: "GPU",
      },
      { type: "BlockRemoved", blockHashes: [-5n, 6n], medium: null },
      { type: "AllBlocksCleared" },
    ];
    return encodeBatch({ ts: 3, events, dataParallelRank: null }, "array");
  }

  it("gives what decodeBatch gives, for a batch larger than one slice", async () => {
    const bytes = bigBatch(40_000);
    expect(bytes.length).toBeGreaterThan(4 * DECODE_SLICE_BYTES);
    expect(plain(await decodeBatchInSlices(bytes))).toEqual(plain(decodeBatch(bytes)));
  });

  it("lets the event loop turn while a batch near the 4 MiB limit decodes", async () => {
    // 330k blocks, 3.9 MB: decoded at once, it held requests and /health for 340-500 ms.
    const bytes = bigBatch(330_000);
    let turns = 0;
    let decoding = true;
    const tick = () => {
      turns++;
      if (decoding) setImmediate(tick);
    };
    setImmediate(tick);
    const batch = await decodeBatchInSlices(bytes);
    decoding = false;
    expect(batch.events[0]!.type).toBe("BlockStored");
    // At least a turn per slice of bytes, and more for the hashes.
    expect(turns).toBeGreaterThan(bytes.length / DECODE_SLICE_BYTES);
  });

  it("refuses what decodeBatch refuses, with KvDecodeError", async () => {
    const bytes = bigBatch(40_000);
    const cut = bytes.subarray(0, bytes.length - 3);
    await expect(decodeBatchInSlices(cut)).rejects.toBeInstanceOf(KvDecodeError);
    expect(() => decodeBatch(cut)).toThrow(KvDecodeError);
  });
});

describe("decodeBatch: vLLM's extra_keys", () => {
  const stored = (extra: unknown) =>
    encode({
      ts: 1,
      events: [
        {
          type: "BlockStored",
          block_hashes: [1, 2],
          parent_block_hash: null,
          token_ids: [1, 2, 3, 4, 5, 6, 7, 8],
          block_size: 4,
          lora_id: null,
          medium: "GPU",
          lora_name: "sql",
          extra_keys: extra,
        },
      ],
    });

  it("keeps the multimodal items of each block as mediaKeys; the adapter and salt are not media", () => {
    const batch = decodeBatch(
      stored([
        ["sql", "salt"],
        ["sql", ["img-hash", 3]],
      ]),
    );
    const event = batch.events[0] as { mediaKeys?: unknown };
    expect(event.mediaKeys).toEqual([null, '["img-hash",3]']);
    const plain = decodeBatch(stored([["sql"], null])).events[0] as { mediaKeys?: unknown };
    expect(plain.mediaKeys).toBeUndefined();
  });

  it("takes the cache salt from a sequence's first block, beside the adapter's name", () => {
    const salted = decodeBatch(stored([["sql", "rg-salt"], ["sql"]])).events[0];
    expect(salted).toMatchObject({ loraName: "sql", cacheSalt: "rg-salt" });
    const unsalted = decodeBatch(stored([["sql"], ["sql"]])).events[0] as { cacheSalt?: unknown };
    expect(unsalted.cacheSalt).toBeUndefined();
  });

  it("refuses extra_keys that are not one entry per block", () => {
    expect(() => decodeBatch(stored([null]))).toThrow(KvDecodeError);
    expect(() => decodeBatch(stored([7, null]))).toThrow(KvDecodeError);
  });
});

describe("the msgpack reader against @msgpack/msgpack", () => {
  // Values of the kinds a KV-event batch holds, nested a few deep.
  const leaf = fc.oneof(
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -(2 ** 31), max: 2 ** 32 - 1 }),
    fc.bigInt({ min: -(2n ** 63n), max: 2n ** 64n - 1n }),
    fc.double({ noNaN: true }),
    fc.string({ maxLength: 40 }),
    fc.uint8Array({ maxLength: 40 }),
  );
  const value = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: "small" }, leaf, tie("array"), tie("map")),
    array: fc.array(tie("value"), { maxLength: 5 }),
    map: fc.dictionary(
      fc.string({ maxLength: 8 }).filter((k) => k !== "__proto__"),
      tie("value"),
      { maxKeys: 5 },
    ),
  })).value;

  it("reads every value as the generic decoder does", () => {
    fc.assert(
      fc.property(value, (v) => {
        const bytes = encode(v, { useBigInt64: true });
        const reader = new MsgpackReader(bytes);
        const steps = reader.value();
        let step = steps.next();
        while (step.done !== true) step = steps.next();
        expect(step.value).toEqual(decode(bytes, { useBigInt64: true }));
        expect(reader.done).toBe(true);
      }),
      { numRuns: 500 },
    );
  });
});
