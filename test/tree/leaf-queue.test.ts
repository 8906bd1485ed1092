import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeafQueue } from "../../src/tree/leaf-queue.js";
import { TreeNode } from "../../src/tree/node.js";

type Op =
  | { kind: "append" }
  | { kind: "promote"; below: number }
  | { kind: "detach"; pick: number }
  | { kind: "touch"; pick: number }
  | { kind: "pop" };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.constant<Op>({ kind: "append" }) },
  {
    weight: 4,
    arbitrary: fc.nat({ max: 1_000_000 }).map((below): Op => ({ kind: "promote", below })),
  },
  { weight: 1, arbitrary: fc.nat().map((pick): Op => ({ kind: "detach", pick })) },
  { weight: 1, arbitrary: fc.nat().map((pick): Op => ({ kind: "touch", pick })) },
  { weight: 3, arbitrary: fc.constant<Op>({ kind: "pop" }) },
);

function node(access: number): TreeNode {
  return new TreeNode("x", 120, null, access);
}

describe("LeafQueue", () => {
  it("always pops the queued node with the oldest access, whatever the mix of operations", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300, size: "max" }), (ops) => {
        const queue = new LeafQueue(node(-1));
        const queued = new Set<TreeNode>();
        const used = new Set<number>();
        let clock = 0;
        const fresh = (): number => {
          clock += 10_000;
          used.add(clock);
          return clock;
        };
        const pick = (i: number): TreeNode | undefined => [...queued][i % Math.max(1, queued.size)];
        for (const o of ops) {
          if (o.kind === "append") {
            const n = node(fresh());
            queue.append(n);
            queued.add(n);
          } else if (o.kind === "promote") {
            // An older access, as a parent left childless by an eviction has (kept unique).
            const access = Math.max(0, clock - o.below) + 0.5;
            if (used.has(access)) continue;
            used.add(access);
            const n = node(access);
            queue.promote(n);
            queued.add(n);
          } else if (o.kind === "detach" || o.kind === "touch") {
            const n = pick(o.pick);
            if (n === undefined) continue;
            queue.detach(n);
            queued.delete(n);
            if (o.kind === "touch") {
              n.access = fresh();
              queue.append(n);
              queued.add(n);
            }
          } else {
            const oldest = [...queued].sort((a, b) => a.access - b.access)[0];
            expect(queue.popOldest()).toBe(oldest);
            if (oldest !== undefined) queued.delete(oldest);
          }
          expect(queue.size).toBe(queued.size);
          const checked = queue.check();
          if (checked.size !== queued.size || [...queued].some((n) => !checked.has(n))) {
            expect.fail("queued nodes differ from the model");
          }
        }
        const drained: number[] = [];
        for (let n = queue.popOldest(); n !== undefined; n = queue.popOldest()) {
          drained.push(n.access);
        }
        expect(drained).toEqual([...queued].map((n) => n.access).sort((a, b) => a - b));
      }),
      { numRuns: 300 },
    );
  });

  it("detaching a node that is not queued is a no-op", () => {
    const queue = new LeafQueue(node(-1));
    const a = node(1);
    queue.append(a);
    queue.detach(node(2));
    expect(queue.size).toBe(1);
    expect(queue.popOldest()).toBe(a);
    expect(queue.popOldest()).toBeUndefined();
  });

  it("clear empties both the list and the heap", () => {
    const queue = new LeafQueue(node(-1));
    queue.append(node(10));
    queue.promote(node(5));
    queue.clear();
    expect(queue.size).toBe(0);
    expect(queue.popOldest()).toBeUndefined();
  });
});
