import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BoundedQueue } from "../../src/state/bounded-queue.js";

describe("BoundedQueue", () => {
  it("refuses a capacity below 1", () => {
    expect(() => new BoundedQueue(0)).toThrow(/capacity/);
  });

  it("drops the oldest items when full and counts them", () => {
    const q = new BoundedQueue<number>(3);
    for (let i = 1; i <= 5; i++) q.push(i);
    expect(q.size).toBe(3);
    expect(q.dropped).toBe(2);
    expect(q.take(10)).toEqual([3, 4, 5]);
    expect(q.size).toBe(0);
  });

  it("puts taken items back in front, dropping the oldest when newer ones filled the room", () => {
    const q = new BoundedQueue<number>(4);
    for (const i of [1, 2, 3]) q.push(i);
    const taken = q.take(3);
    q.push(4);
    q.push(5);
    q.requeueFront(taken);
    expect(q.dropped).toBe(1);
    expect(q.take(10)).toEqual([2, 3, 4, 5]);
  });

  it("behaves like a FIFO list truncated to its capacity (model test)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.array(fc.oneof(fc.integer({ min: 0, max: 99 }), fc.constant(-1)), { maxLength: 60 }),
        (capacity, steps) => {
          const q = new BoundedQueue<number>(capacity);
          let model: number[] = [];
          let dropped = 0;
          for (const step of steps) {
            if (step === -1) {
              expect(q.take(2)).toEqual(model.slice(0, 2));
              model = model.slice(2);
            } else {
              q.push(step);
              model.push(step);
              if (model.length > capacity) {
                model.shift();
                dropped += 1;
              }
            }
            expect(q.size).toBe(model.length);
            expect(q.dropped).toBe(dropped);
          }
          expect(q.take(capacity)).toEqual(model);
        },
      ),
    );
  });
});
