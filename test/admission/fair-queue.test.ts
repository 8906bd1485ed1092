import { describe, expect, it } from "vitest";
import { FairQueue, type QueueEntry } from "../../src/admission/fair-queue.js";

interface Item extends QueueEntry {
  name: string;
}
const item = (name: string, tenant: string, priority = 0, cost = 100): Item => ({
  name,
  tenant,
  priority,
  cost,
  seq: 0,
});

function drain(queue: FairQueue<Item>, count = Number.POSITIVE_INFINITY): string[] {
  const out: string[] = [];
  for (let next = queue.peek(); next !== undefined && out.length < count; next = queue.peek()) {
    queue.take(next);
    out.push(next.name);
  }
  return out;
}

describe("FairQueue", () => {
  it("serves the highest priority band first, each tenant's requests in arrival order", () => {
    const queue = new FairQueue<Item>();
    queue.push(item("low1", "a", -1));
    queue.push(item("mid1", "a", 0));
    queue.push(item("high1", "b", 5));
    queue.push(item("mid2", "a", 0));
    queue.push(item("high2", "b", 5));
    expect(drain(queue)).toEqual(["high1", "high2", "mid1", "mid2", "low1"]);
    expect(queue.size).toBe(0);
  });

  it("gives a tenant sending 10x the requests its fair share of work, not 10x", () => {
    const queue = new FairQueue<Item>();
    for (let i = 0; i < 100; i++) queue.push(item(`a${i}`, "a"));
    for (let i = 0; i < 10; i++) queue.push(item(`b${i}`, "b"));
    const first20 = drain(queue, 20);
    const fromB = first20.filter((n) => n.startsWith("b")).length;
    expect(fromB).toBe(10);
  });

  it("shares by tokens, not requests: a tenant of 4x larger requests gets a quarter as many", () => {
    const queue = new FairQueue<Item>();
    for (let i = 0; i < 50; i++) queue.push(item(`big${i}`, "big", 0, 400));
    for (let i = 0; i < 50; i++) queue.push(item(`small${i}`, "small", 0, 100));
    const first25 = drain(queue, 25);
    const big = first25.filter((n) => n.startsWith("big")).length;
    expect(big).toBeGreaterThanOrEqual(4);
    expect(big).toBeLessThanOrEqual(6);
  });

  it("lifts a tenant that starts waiting again to the others' service: no credit saved up while idle", () => {
    const queue = new FairQueue<Item>();
    for (let i = 0; i < 20; i++) queue.push(item(`a${i}`, "a"));
    drain(queue, 10);
    // b arrives after a got 1000 tokens of service: b does not get 10 turns in a row.
    for (let i = 0; i < 10; i++) queue.push(item(`b${i}`, "b"));
    const next6 = drain(queue, 6);
    expect(next6.filter((n) => n.startsWith("b")).length).toBe(3);
  });

  it("puts a light tenant that starts waiting before the flood it ties with, not behind one more of its requests (issue 24)", () => {
    const queue = new FairQueue<Item>();
    for (let i = 0; i < 20; i++) queue.push(item(`a${i}`, "a", 0, 1096));
    drain(queue, 5);
    // b is lifted to a's counter exactly: a tie, and b has one request waiting against a's 15.
    queue.push(item("b0", "b", 0, 116));
    expect(queue.peek()?.name).toBe("b0");
    expect(queue.find(() => true, 64)?.name).toBe("b0");
    expect(drain(queue, 2)).toEqual(["b0", "a5"]);
  });

  it("names the lowest band's heaviest tenant's newest request as the one to shed", () => {
    const queue = new FairQueue<Item>();
    queue.push(item("a-low-old", "a", -1));
    queue.push(item("a-low-new", "a", -1));
    queue.push(item("b-mid", "b", 0));
    expect(queue.victimFor(item("c-high", "c", 3))?.name).toBe("a-low-new");
    // A newcomer below every band goes itself.
    expect(queue.victimFor(item("c-lower", "c", -2))).toBeUndefined();
    // Its own tenant's bound: its own lowest-priority newest, only if below the newcomer.
    expect(queue.tenantVictimFor(item("a-high", "a", 2))?.name).toBe("a-low-new");
    expect(queue.tenantVictimFor(item("a-lowest", "a", -1))).toBeUndefined();
  });

  it("removes an entry from anywhere (client gone, deadline) and keeps its counts right", () => {
    const queue = new FairQueue<Item>();
    const x = item("x", "a");
    queue.push(item("w", "a"));
    queue.push(x);
    queue.push(item("y", "b"));
    expect(queue.remove(x)).toBe(true);
    expect(queue.remove(x)).toBe(false);
    expect(queue.queuedFor("a")).toBe(1);
    expect([...queue.tenantSizes()]).toEqual([
      ["a", 1],
      ["b", 1],
    ]);
    expect(drain(queue).sort()).toEqual(["w", "y"]);
    expect(queue.queuedFor("a")).toBe(0);
  });
});
