/**
 * A misbehaving engine's KV-event publisher, run as its own process (node --import tsx) so that
 * its sending does not share an event loop with the probes of the test that drives it: real ZMQ
 * PUB and replay (ROUTER) sockets on 127.0.0.1, the replay buffer always empty.
 *
 * stdout: one JSON line with the endpoints, then one JSON line per command done.
 * stdin commands: `warm` (one small batch), `prepare` (encodes the huge batch), `huge` (sends
 * one BlockStored of 4.25M one-token blocks, ~51 MB: over the 50 MB), `flood <secs> <events per sec>` (batches of 100 one-block BlockStored events, every
 * hash new, sent in 10 ms ticks; all secs x rate of them, a loaded machine taking longer).
 */
import { createInterface } from "node:readline";
import { Publisher, Router } from "zeromq";
import { encodeBatch, type WireEvent } from "../../sim/kv-event-encoder.js";
import { encodeSequence } from "../../src/kv-events/decode.js";

const EVENTS_PER_MESSAGE = 100;
const TICK_MS = 10;
/** Hashes are HASH_BASE + n: above 2^32, so msgpack writes each as 0xcf and 8 bytes. */
const HASH_BASE = 2 ** 40;

const pub = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
await pub.bind("tcp://127.0.0.1:*");
const replay = new Router({ linger: 0 });
await replay.bind("tcp://127.0.0.1:*");
void (async () => {
  try {
    for await (const [client] of replay) await replay.send([client!, "", encodeSequence(-1n), ""]);
  } catch {
    // closed
  }
})();

let sequence = 0n;
let nextHash = 0;
const send = (payload: Uint8Array) => pub.send(["", encodeSequence(sequence++), payload]);

/** A batch template and where each event's hash sits in it, to stamp new hashes quickly. */
const template = (() => {
  const events: WireEvent[] = Array.from({ length: EVENTS_PER_MESSAGE }, (_, e) => ({
    type: "BlockStored",
    blockHashes: [BigInt(HASH_BASE + e)],
    parentHash: null,
    tokenIds: Array.from({ length: 16 }, (_, i) => 1000 + e * 16 + i),
    blockSize: 16,
    medium: "GPU",
  }));
  const bytes = Buffer.from(encodeBatch({ ts: 1, events }, "array"));
  const offsets = events.map((_, e) => {
    const marker = Buffer.alloc(9);
    marker[0] = 0xcf;
    marker.writeBigUInt64BE(BigInt(HASH_BASE + e), 1);
    const at = bytes.indexOf(marker);
    if (at < 0) throw new Error("hash not found in the template");
    return at + 1;
  });
  return { bytes, offsets };
})();

function floodBatch(): Buffer {
  const out = Buffer.from(template.bytes);
  for (const at of template.offsets) out.writeBigUInt64BE(BigInt(HASH_BASE + nextHash++), at);
  return out;
}

function hugeBatch(): Uint8Array {
  const n = 4_250_000;
  const hashes = Array.from({ length: n }, (_, i) => 2 ** 33 + i);
  const tokens = Array.from({ length: n }, (_, i) => 1000 + (i % 60_000));
  const stored: WireEvent = {
    type: "BlockStored",
    blockHashes: hashes,
    parentHash: null,
    tokenIds: tokens,
    blockSize: 1,
  };
  return encodeBatch({ ts: Date.now() / 1000, events: [stored] }, "array");
}

async function flood(secs: number, eventsPerSec: number): Promise<number> {
  const perTick = Math.round((eventsPerSec / EVENTS_PER_MESSAGE) * (TICK_MS / 1000));
  const start = performance.now();
  let sent = 0;
  // Every tick's messages are sent, late ones at once: on a loaded machine the flood runs longer
  // than `secs` rather than sending fewer events than asked.
  const ticks = Math.round((secs * 1000) / TICK_MS);
  for (let tick = 0; tick < ticks; tick++) {
    for (let m = 0; m < perTick; m++) {
      await send(floodBatch());
      sent += EVENTS_PER_MESSAGE;
    }
    const wait = start + (tick + 1) * TICK_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  return sent;
}

let huge: Uint8Array | undefined;
const out = (value: unknown) => process.stdout.write(`${JSON.stringify(value)}\n`);
out({ endpoint: pub.lastEndpoint, replayEndpoint: replay.lastEndpoint });

for await (const line of createInterface({ input: process.stdin })) {
  const [command, a, b] = line.trim().split(/\s+/);
  if (command === "warm") {
    await send(floodBatch());
    out({ done: "warm" });
  } else if (command === "prepare") {
    huge = hugeBatch();
    out({ done: "prepare" });
  } else if (command === "huge") {
    const payload = huge ?? hugeBatch();
    await send(payload);
    out({ done: "huge", bytes: payload.length });
  } else if (command === "flood") {
    const start = performance.now();
    const sent = await flood(Number(a), Number(b));
    out({ done: "flood", sent, seconds: (performance.now() - start) / 1000 });
  }
}
pub.close();
replay.close();
