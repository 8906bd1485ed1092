import type { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { RouterError } from "../../src/errors.js";
import { LargeBodyGate } from "../../src/intake/large-body-gate.js";
import { POKE_HOLD_BYTES, pokeWhileLight } from "../../src/intake/read-body.js";

describe("the large-body gate's line", () => {
  it("refuses one more waiter at once when the line is full, and takes it again once there is room", async () => {
    const gate = new LargeBodyGate({ bytes: 10, reads: 1, waitMs: 60_000, maxWaiting: 2 });
    const turn = gate.tryEnter();
    expect(turn).toBeDefined();
    const first = gate.wait();
    const second = gate.wait();
    expect(gate.waiting).toBe(2);
    const refused = await gate.wait().turn.catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(RouterError);
    expect((refused as RouterError).code).toBe("large_body_busy");
    expect((refused as RouterError).retryAfterSecs).toBeGreaterThan(0);
    expect(gate.waiting).toBe(2);
    first.cancel();
    const third = gate.wait();
    expect(gate.waiting).toBe(2);
    turn?.leave();
    (await second.turn).leave();
    (await third.turn).leave();
    expect(gate.active).toBe(0);
  });
});

describe("watching a paused body for a hang-up", () => {
  const paused = (readableLength: number) => {
    let resumed = 0;
    const socket = { resume: () => resumed++ } as unknown as Socket;
    return { incoming: { readableLength, socket }, resumed: () => resumed };
  };

  it("reads the socket again while the body holds less than the bound", () => {
    const p = paused(POKE_HOLD_BYTES - 1);
    pokeWhileLight(p.incoming);
    expect(p.resumed()).toBe(1);
  });

  it("leaves the socket paused once the body holds the bound: no chunk a second past it", () => {
    const p = paused(POKE_HOLD_BYTES);
    for (let i = 0; i < 30; i++) pokeWhileLight(p.incoming);
    expect(p.resumed()).toBe(0);
  });
});
