import { describe, expect, it } from "vitest";
import { SiblingHub } from "../../src/state/cluster-hub.js";
import { readSiblingMessage, type SiblingMessage } from "../../src/state/cluster-messages.js";

/** A hub with `n` processes whose received messages are kept, each said hello. */
function hubWith(n: number, now: () => number = Date.now) {
  const hub = new SiblingHub(now);
  const inbox = new Map<number, SiblingMessage[]>();
  for (let id = 1; id <= n; id++) {
    inbox.set(id, []);
    hub.add(id, (m) => inbox.get(id)!.push(m));
    hub.receive(id, { rg: "sib", t: "hello" });
  }
  for (const box of inbox.values()) box.length = 0;
  return { hub, inbox };
}

const insert = (worker: string, text: string) => ({ kind: "insert", worker, text });

describe("SiblingHub (radixgate-cluster's primary relaying its processes' decisions)", () => {
  it("relays a process's decisions and counts to every other process, not back to it", () => {
    const { hub, inbox } = hubWith(3);
    hub.receive(1, { rg: "sib", t: "ops", ops: [insert("w1", "abc")] });
    hub.receive(1, { rg: "sib", t: "load", counts: { w1: 2 } });
    expect(inbox.get(1)).toEqual([]);
    for (const id of [2, 3]) {
      expect(inbox.get(id)).toEqual([
        { rg: "sib", t: "ops", from: 1, ops: [insert("w1", "abc")] },
        { rg: "sib", t: "load", from: 1, counts: { w1: 2 } },
      ]);
    }
  });

  it("relays admin-made membership and replays the last change per worker, before the decisions, to a later process", () => {
    const { hub, inbox } = hubWith(2);
    const add = (url: string) => ({ kind: "add", url, fields: { url, api_key: "k" } });
    hub.receive(1, { rg: "sib", t: "member", change: add("http://10.0.0.1:1") });
    hub.receive(1, { rg: "sib", t: "member", change: add("http://10.0.0.2:1") });
    hub.receive(2, {
      rg: "sib",
      t: "member",
      change: { kind: "remove", url: "http://10.0.0.1:1" },
    });
    hub.receive(1, { rg: "sib", t: "ops", ops: [insert("w2", "abc")] });
    expect(inbox.get(2)![0]).toEqual({
      rg: "sib",
      t: "member",
      from: 1,
      change: add("http://10.0.0.1:1"),
    });
    expect(inbox.get(1)!.map((m) => m.t)).toEqual(["member"]);
    expect(hub.memberChangeCount).toBe(2);
    const late: SiblingMessage[] = [];
    hub.add(3, (m) => late.push(m));
    hub.receive(3, { rg: "sib", t: "hello" });
    expect(late.map((m) => (m.t === "member" ? `${m.change.kind} ${m.change.url}` : m.t))).toEqual([
      "add http://10.0.0.2:1",
      "remove http://10.0.0.1:1",
      "ops",
      "ready",
    ]);
  });

  it("refuses a malformed membership change", () => {
    expect(readSiblingMessage({ rg: "sib", t: "member", change: { kind: "add", url: 1 } })).toBe(
      undefined,
    );
    expect(
      readSiblingMessage({
        rg: "sib",
        t: "member",
        change: { kind: "add", url: "u", fields: { url: { nested: true } } },
      }),
    ).toBe(undefined);
  });

  it("relays the counts a decision's message carries, and keeps them for a later process", () => {
    const { hub, inbox } = hubWith(2);
    hub.receive(1, { rg: "sib", t: "ops", ops: [insert("w1", "abc")], counts: { w1: 3 } });
    expect(inbox.get(2)).toEqual([
      { rg: "sib", t: "ops", from: 1, ops: [insert("w1", "abc")], counts: { w1: 3 } },
    ]);
    const late: SiblingMessage[] = [];
    hub.add(5, (m) => late.push(m));
    hub.receive(5, { rg: "sib", t: "hello" });
    expect(late).toContainEqual({ rg: "sib", t: "load", from: 1, counts: { w1: 3 } });
  });

  it("answers claims first come first served until the claim expires", () => {
    let now = 1000;
    const { hub, inbox } = hubWith(2, () => now);
    hub.receive(1, { rg: "sib", t: "claim", n: 7, key: "k", value: "w1|a", ttlMs: 100 });
    hub.receive(2, { rg: "sib", t: "claim", n: 3, key: "k", value: "w2|b", ttlMs: 100 });
    expect(inbox.get(1)).toEqual([{ rg: "sib", t: "claimed", n: 7, value: "w1|a" }]);
    expect(inbox.get(2)).toEqual([{ rg: "sib", t: "claimed", n: 3, value: "w1|a" }]);
    now += 101;
    hub.receive(2, { rg: "sib", t: "claim", n: 4, key: "k", value: "w2|b", ttlMs: 100 });
    expect(inbox.get(2)?.at(-1)).toEqual({ rg: "sib", t: "claimed", n: 4, value: "w2|b" });
  });

  it("replays the newest decisions and the siblings' counts to a process that starts later", () => {
    const { hub } = hubWith(1);
    hub.receive(1, { rg: "sib", t: "ops", ops: [insert("w1", "one"), insert("w2", "two")] });
    hub.receive(1, { rg: "sib", t: "load", counts: { w2: 1 } });
    const late: SiblingMessage[] = [];
    hub.add(9, (m) => late.push(m));
    hub.receive(1, { rg: "sib", t: "ops", ops: [insert("w1", "three")] });
    expect(late).toEqual([]); // not a router yet: it gets the replay when it says hello
    hub.receive(9, { rg: "sib", t: "hello" });
    expect(late).toEqual([
      {
        rg: "sib",
        t: "ops",
        ops: [insert("w1", "one"), insert("w2", "two"), insert("w1", "three")],
      },
      { rg: "sib", t: "load", from: 1, counts: { w2: 1 } },
      { rg: "sib", t: "ready" },
    ]);
  });

  it("keeps at most 10,000 decisions for replay (bounded memory)", () => {
    const { hub } = hubWith(1);
    for (let i = 0; i < 120; i++) {
      const ops = Array.from({ length: 100 }, (_, j) => insert("w", `t${i}-${j}`));
      hub.receive(1, { rg: "sib", t: "ops", ops });
    }
    expect(hub.recentCount).toBe(10_000);
  });

  it("tells the others when a process with counts is gone", () => {
    const { hub, inbox } = hubWith(2);
    hub.receive(1, { rg: "sib", t: "load", counts: { w1: 4 } });
    hub.remove(1);
    expect(inbox.get(2)?.at(-1)).toEqual({ rg: "sib", t: "gone", from: 1 });
  });

  it("ignores what is not one of its messages, or not well formed", () => {
    const { hub, inbox } = hubWith(2);
    for (const bad of [
      "radixgate:stop",
      null,
      { cmd: "NODE_CLUSTER" },
      { rg: "sib", t: "ops", ops: "nope" },
      { rg: "sib", t: "claim", n: -1, key: "k", value: "v", ttlMs: 1 },
      { rg: "sib", t: "load", counts: 3 },
    ]) {
      hub.receive(1, bad);
    }
    expect(inbox.get(1)).toEqual([]);
    expect(inbox.get(2)).toEqual([]);
  });
});

describe("readSiblingMessage", () => {
  it("keeps the well-formed ops of a batch and drops the others", () => {
    const read = readSiblingMessage({
      rg: "sib",
      t: "ops",
      ops: [
        insert("w1", "ok"),
        { kind: "truncate", worker: "w1", text: "ok", keep: 1, model: "m" },
        { kind: "truncate", worker: "w1", text: "ok", keep: -1 },
        { kind: "add", url: "http://x" },
        { kind: "insert", worker: 5, text: "x" },
      ],
    });
    expect(read).toEqual({
      rg: "sib",
      t: "ops",
      ops: [
        insert("w1", "ok"),
        { kind: "truncate", worker: "w1", text: "ok", keep: 1, model: "m" },
      ],
    });
  });

  it("keeps only positive integer counts", () => {
    expect(
      readSiblingMessage({ rg: "sib", t: "load", from: 2, counts: { a: 1, b: 0, c: 1.5, d: "2" } }),
    ).toEqual({ rg: "sib", t: "load", from: 2, counts: { a: 1 } });
  });
});
