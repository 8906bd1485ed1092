import { describe, expect, it } from "vitest";
import { freeSeat, SiblingOutbox } from "../../src/state/cluster-channel.js";
import { SiblingHub } from "../../src/state/cluster-hub.js";
import type { SiblingMessage } from "../../src/state/cluster-messages.js";

/** A channel whose pipe takes nothing until `drain()`: the backlog of a stalled process. */
function stalledChannel() {
  const written: SiblingMessage[] = [];
  const waiting: (() => void)[] = [];
  return {
    written,
    write(message: SiblingMessage, done: () => void): boolean {
      written.push(message);
      waiting.push(done);
      return false; // Node's back-pressure answer: queued, but unwise to send more
    },
    drain() {
      for (const done of waiting.splice(0)) done();
    },
  };
}

const ops = (n: number): SiblingMessage => ({
  rg: "sib",
  t: "ops",
  ops: [{ kind: "insert", worker: "w1", text: `t${n}` }],
});

describe("SiblingOutbox (radixgate-cluster's channel, bounded)", () => {
  it("drops decision batches and load past the backlog limit, counts them, and says so once", () => {
    const channel = stalledChannel();
    let stalls = 0;
    const drained: number[] = [];
    const outbox = new SiblingOutbox(
      channel.write,
      { onStall: () => (stalls += 1), onDrained: (n) => drained.push(n) },
      3,
    );
    for (let i = 0; i < 10; i++) outbox.send(ops(i));
    outbox.send({ rg: "sib", t: "load", counts: { w1: 1 } });
    expect(channel.written).toHaveLength(3);
    expect(outbox.backlog).toBe(3);
    expect(outbox.dropped).toBe(8);
    expect(stalls).toBe(1);
    // Caught up: told how many were dropped, and the channel carries decisions again.
    channel.drain();
    expect(drained).toEqual([8]);
    expect(outbox.backlog).toBe(0);
    outbox.send(ops(99));
    expect(channel.written).toHaveLength(4);
  });

  it("never drops membership changes, claims, the replay's end or a sibling's exit", () => {
    const channel = stalledChannel();
    const outbox = new SiblingOutbox(channel.write, {}, 1);
    outbox.send(ops(0));
    const kept: SiblingMessage[] = [
      { rg: "sib", t: "member", change: { kind: "remove", url: "http://10.0.0.1:1" } },
      { rg: "sib", t: "claim", n: 1, key: "k", value: "w1", ttlMs: 100 },
      { rg: "sib", t: "claimed", n: 1, value: "w1" },
      { rg: "sib", t: "ready" },
      { rg: "sib", t: "gone", from: 2 },
    ];
    for (const m of kept) outbox.send(m);
    outbox.send(ops(1));
    expect(channel.written).toEqual([ops(0), ...kept]);
  });

  it("the hub, once a stalled process caught up, sends it its siblings' counts again and what it missed", () => {
    const hub = new SiblingHub();
    const inbox: SiblingMessage[] = [];
    hub.add(1, () => {});
    hub.add(2, (m) => inbox.push(m));
    hub.receive(1, { rg: "sib", t: "hello" });
    hub.receive(2, { rg: "sib", t: "hello" });
    hub.receive(1, { rg: "sib", t: "load", counts: { w1: 4 } });
    inbox.length = 0;
    hub.caughtUp(2, 7);
    expect(inbox).toEqual([
      { rg: "sib", t: "load", from: 1, counts: { w1: 4 } },
      { rg: "sib", t: "missed", n: 7 },
    ]);
  });
});

describe("freeSeat (radixgate-cluster's seat for a process it starts)", () => {
  it("gives the lowest seat no live process holds: 0, 1, ... then the one that freed", () => {
    expect(freeSeat([])).toBe(0);
    expect(freeSeat([0, 1, 2])).toBe(3);
    expect(freeSeat([0, 2, 3])).toBe(1);
    expect(
      freeSeat(
        new Map([
          [7, 1],
          [9, 0],
        ]).values(),
      ),
    ).toBe(2);
  });
});
