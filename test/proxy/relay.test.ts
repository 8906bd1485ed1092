/**
 * The streamed relay's correctness (issue 23): every chunk reaches the client in order, a client
 * that stops reading holds the worker back (nothing is read ahead into the router's memory), and a
 * client that leaves ends the worker's request. Real sockets, tiny scripted upstreams; no timings.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import {
  pausedCompletion,
  startedPerTest,
  startLoggedRouter,
  startTinyUpstream,
} from "../faults/support.js";
import { waitFor } from "../helpers/router.js";

/** The i-th event of a numbered stream; sizes vary so events and reads never line up. */
function event(i: number): string {
  return `data: {"n":${i},"pad":"${"x".repeat((i * 37) % 300)}"}\n\n`;
}

/** Sends an SSE request the low-level way and gives back the response, paused. */
function openStream(url: string): {
  response: Promise<IncomingMessage>;
  destroy: () => void;
} {
  return pausedCompletion(url, '{"model":"m","prompt":"count for me","stream":true}');
}

/** Reads a response to its end; resolves with its text and whether it arrived whole. */
function readAll(res: IncomingMessage): Promise<{ text: string; complete: boolean }> {
  const parts: Buffer[] = [];
  return new Promise((resolve) => {
    res.on("data", (b: Buffer) => parts.push(b));
    res.on("close", () =>
      resolve({ text: Buffer.concat(parts).toString(), complete: res.complete }),
    );
    res.resume();
  });
}

describe("relay: chunks, back-pressure, disconnects", () => {
  const started = startedPerTest();

  it("every chunk the engine sends reaches the client whole and in order (single writes, bursts, events split across writes)", async () => {
    const count = 3000;
    const sent: string[] = [];
    const tiny = await startTinyUpstream((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      let i = 0;
      // Turns of 1 to 7 events, some written in two halves, so the router sees chunks of every
      // shape: one event, several in one read, an event cut in the middle.
      const turn = () => {
        const burst = 1 + (i % 7);
        for (let k = 0; k < burst && i < count; k++, i++) {
          const text = event(i);
          sent.push(text);
          if (i % 5 === 0) {
            const cut = Math.floor(text.length / 2);
            res.write(text.slice(0, cut));
            res.write(text.slice(cut));
          } else res.write(text);
        }
        if (i < count) setImmediate(turn);
        else res.end("data: [DONE]\n\n");
      };
      turn();
    });
    started.tiny = [tiny];
    const { router } = await startLoggedRouter({ workerUrls: [tiny.url] });
    started.router = router;

    const { text, complete } = await readAll(await openStream(router.url).response);
    expect(complete).toBe(true);
    // Byte for byte what the engine sent: nothing lost, repeated or reordered.
    expect(text).toBe(`${sent.join("")}data: [DONE]\n\n`);
    const numbers = [...text.matchAll(/"n":(\d+)/g)].map((m) => Number(m[1]));
    expect(numbers).toEqual(Array.from({ length: count }, (_, n) => n));
  }, 30_000);

  it("a client that stops reading holds the engine back: the router stops reading instead of buffering the rest, and relays all of it once the client reads again", async () => {
    const total = 64 * 1024 * 1024;
    const block = Buffer.alloc(64 * 1024);
    const upstream = { sent: 0, finished: false, res: undefined as ServerResponse | undefined };
    const tiny = await startTinyUpstream((_req, res) => {
      upstream.res = res;
      res.writeHead(200, { "content-type": "text/event-stream" });
      let seq = 0;
      const pump = () => {
        while (upstream.sent < total) {
          // Each block numbered in its first bytes, so the client can check the order.
          block.fill(0x61);
          block.write(`data: ${String(seq++).padStart(10, "0")}`);
          block.write("\n\n", block.length - 2);
          upstream.sent += block.length;
          if (!res.write(Buffer.from(block))) return void res.once("drain", pump);
        }
        upstream.finished = true;
        res.end();
      };
      pump();
    });
    started.tiny = [tiny];
    const { router } = await startLoggedRouter({
      workerUrls: [tiny.url],
      clientStallSecs: 0,
      idleTimeoutSecs: 600,
    });
    started.router = router;

    const stream = openStream(router.url);
    const res = await stream.response;
    // Wait until the engine is blocked and stays blocked: its socket is full because the router
    // stopped reading it. A router that read on into its own memory would take all 64 MB.
    let last = -1;
    let still = 0;
    await waitFor(
      () => {
        if (upstream.finished) return true;
        still = upstream.sent === last && upstream.res?.writableNeedDrain ? still + 1 : 0;
        last = upstream.sent;
        return still >= 10;
      },
      20_000,
      () => `engine sent ${upstream.sent} bytes`,
    );
    expect(upstream.finished).toBe(false);
    expect(upstream.sent).toBeLessThan(total / 2);

    const { text, complete } = await readAll(res);
    expect(complete).toBe(true);
    expect(text.length).toBe(total);
    const seqs = [...text.matchAll(/data: (\d{10})/g)].map((m) => Number(m[1]));
    expect(seqs).toEqual(Array.from({ length: total / block.length }, (_, n) => n));
  }, 60_000);

  it("a client that disconnects mid-stream ends the engine's request, and the worker's slot is free", async () => {
    const upstream = { opened: 0, closed: 0, chunks: 0 };
    const tiny = await startTinyUpstream((_req, res) => {
      upstream.opened++;
      res.writeHead(200, { "content-type": "text/event-stream" });
      // An endless stream, one event every 5 ms, until the router hangs up.
      const timer = setInterval(() => {
        upstream.chunks++;
        res.write(event(upstream.chunks));
      }, 5);
      res.on("close", () => {
        clearInterval(timer);
        upstream.closed++;
      });
    });
    started.tiny = [tiny];
    const { router, accessLog } = await startLoggedRouter({ workerUrls: [tiny.url] });
    started.router = router;
    const worker = router.context.registry.list()[0]!;

    const stream = openStream(router.url);
    const res = await stream.response;
    let received = 0;
    await new Promise<void>((resolve) => {
      res.on("data", (b: Buffer) => {
        received += b.length;
        if (received > 2000) resolve();
      });
      res.resume();
    });
    expect(upstream.closed).toBe(0);
    stream.destroy();
    await waitFor(() => upstream.closed === 1, 10_000, "the engine's stream closed");
    await waitFor(() => worker.inFlight === 0, 5000, "in-flight back to 0");
    await waitFor(() => accessLog().length === 1, 5000, "the access log line");
    expect(accessLog()[0]).toMatchObject({ status: 499, error: "client_abort" });
    expect(worker.breaker.consecutiveFailures).toBe(0);
  }, 30_000);
});
