/**
 * A refused body's memory goes back at once: the piece that proved it too deep (or too large),
 * and what was kept before it, are detached, so that a flood of refused bodies does not pile up
 * V8 external memory until full collections; so is each piece of a large body once copied into
 * the body's buffer. A body handed out is never touched.
 */
import type { IncomingMessage } from "node:http";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { type BodyReadLimits, readBody, releaseChunk } from "../../src/intake/read-body.js";

const LIMITS: BodyReadLimits = {
  maxBytes: 1_000_000,
  totalTimeoutMs: 5000,
  idleTimeoutMs: 5000,
  minBytesPerSec: 0,
  maxNesting: 1000,
};

/** A request stream with these headers; its pieces are written by the test. */
function incoming(headers: Record<string, string> = {}): PassThrough & IncomingMessage {
  const stream = new PassThrough();
  Object.assign(stream, { headers: { "content-type": "application/json", ...headers } });
  return stream as PassThrough & IncomingMessage;
}

/** A piece that is the whole of its own ArrayBuffer, as Node's HTTP parser hands them over. */
function ownPiece(text: string): Buffer {
  const piece = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
  piece.write(text);
  return piece;
}

describe("releasing a refused body's memory", () => {
  it("detaches the piece that proves the body nested too deep", async () => {
    const stream = incoming();
    const reading = readBody(stream, LIMITS);
    const deep = ownPiece(`{"extra":${"[".repeat(5000)}`);
    stream.write(deep);
    await expect(reading).rejects.toThrow(/nested deeper than 1000/);
    expect(deep.byteLength).toBe(0);
  });

  it("detaches what was kept before a piece that takes the body past its limit", async () => {
    const stream = incoming();
    const reading = readBody(stream, { ...LIMITS, maxBytes: 100 });
    const first = ownPiece(`{"prompt":"${"a".repeat(60)}`);
    const second = ownPiece(`${"a".repeat(60)}"}`);
    stream.write(first);
    await new Promise((resolve) => setImmediate(resolve));
    expect(first.byteLength).toBeGreaterThan(0);
    stream.write(second);
    await expect(reading).rejects.toThrow(/exceeds the limit/);
    expect(first.byteLength).toBe(0);
    expect(second.byteLength).toBe(0);
  });

  it("leaves a body read whole alone", async () => {
    const stream = incoming();
    const reading = readBody(stream, LIMITS);
    const whole = ownPiece(`{"prompt":"hello"}`);
    stream.end(whole);
    const body = await reading;
    expect(body.toString()).toBe(`{"prompt":"hello"}`);
    expect(whole.byteLength).toBe(18);
  });

  it("frees each piece of a large body once it is copied into the body's buffer", async () => {
    const text = JSON.stringify({ prompt: "p".repeat(200_000) });
    const stream = incoming({ "content-length": String(Buffer.byteLength(text)) });
    const reading = readBody(stream, LIMITS);
    const pieces = [text.slice(0, 70_000), text.slice(70_000, 140_000), text.slice(140_000)].map(
      ownPiece,
    );
    for (const piece of pieces) stream.write(piece);
    stream.end();
    const body = await reading;
    expect(body.toString()).toBe(text);
    expect(pieces.map((piece) => piece.byteLength)).toEqual([0, 0, 0]);
  });

  it("leaves a refused piece alone while another listener reads the stream too", async () => {
    const stream = incoming();
    stream.on("data", () => {});
    const reading = readBody(stream, LIMITS);
    const deep = ownPiece(`{"extra":${"[".repeat(5000)}`);
    stream.write(deep);
    await expect(reading).rejects.toThrow(/nested deeper/);
    expect(deep.byteLength).toBe(5009);
  });

  it("releases only a piece that is the whole of its memory, never a view into a shared one", () => {
    const shared = Buffer.allocUnsafeSlow(64);
    const view = shared.subarray(8, 16);
    releaseChunk(view);
    expect(view.byteLength).toBe(8);
    expect(shared.byteLength).toBe(64);
    const pooled = Buffer.from("short");
    releaseChunk(pooled);
    expect(pooled.toString()).toBe("short");
    releaseChunk(shared);
    expect(shared.byteLength).toBe(0);
  });
});
