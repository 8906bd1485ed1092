import { describe, expect, it } from "vitest";
import { RouterError } from "../../src/errors.js";
import { Admission } from "../../src/proxy/admission.js";
import { Cancel } from "../../src/proxy/cancel.js";

describe("Admission", () => {
  it("is a no-op when disabled", async () => {
    const a = new Admission(0, 0, 1000);
    const releases = await Promise.all([a.acquire(), a.acquire(), a.acquire()]);
    expect(releases).toHaveLength(3);
  });

  it("queues beyond the limit and hands the slot over in FIFO order", async () => {
    const a = new Admission(1, 10, 10_000);
    const first = await a.acquire();
    const order: number[] = [];
    const track = (n: number) => (release: () => void) => {
      order.push(n);
      return release;
    };
    const second = a.acquire().then(track(2));
    const third = a.acquire().then(track(3));
    expect(a.waiting).toBe(2);
    first();
    (await second)();
    (await third)();
    expect(order).toEqual([2, 3]);
    expect(a.running).toBe(0);
  });

  it("answers 429 at once when the queue is full", async () => {
    const a = new Admission(1, 1, 10_000);
    const release = await a.acquire();
    const waiting = a.acquire();
    await expect(a.acquire()).rejects.toMatchObject({ code: "too_many_requests", status: 429 });
    release();
    (await waiting)();
  });

  it("answers 408 when a request waited too long", async () => {
    const a = new Admission(1, 5, 20);
    const release = await a.acquire();
    const err = await a.acquire().catch((e) => e);
    expect(err).toBeInstanceOf(RouterError);
    expect(err.code).toBe("queue_timeout");
    expect(a.waiting).toBe(0);
    release();
    expect(a.running).toBe(0);
  });

  it("a client that leaves while waiting leaves the queue", async () => {
    const a = new Admission(1, 5, 10_000);
    const release = await a.acquire();
    const client = new Cancel();
    const waiting = a.acquire(client);
    client.abort();
    await expect(waiting).rejects.toThrow(/client disconnected/);
    expect(a.waiting).toBe(0);
    release();
    expect(a.running).toBe(0);
  });

  it("releasing twice does not free two slots", async () => {
    const a = new Admission(1, 5, 10_000);
    const release = await a.acquire();
    release();
    release();
    expect(a.running).toBe(0);
    await a.acquire();
    expect(a.running).toBe(1);
  });
});
