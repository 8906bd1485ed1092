import { describe, expect, it } from "vitest";
import { waitFor } from "../helpers/router.js";
import {
  pausedCompletion,
  startedPerTest,
  startLoggedRouter,
  startTinyUpstream,
} from "./support.js";

/** An engine streaming an endless answer as fast as its client takes it; counts closed streams. */
async function endlessUpstream() {
  const state = { open: 0, closed: 0 };
  const tiny = await startTinyUpstream((_req, res) => {
    state.open++;
    res.writeHead(200, { "content-type": "text/event-stream" });
    const chunk = Buffer.from(`data: ${"x".repeat(64 * 1024)}\n\n`);
    let done = false;
    res.on("close", () => {
      done = true;
      state.open--;
      state.closed++;
    });
    const pump = () => {
      while (!done) if (!res.write(chunk)) return void res.once("drain", pump);
    };
    pump();
  });
  return { tiny, state };
}

/**
 * A client that reads the status line and then nothing more. `resume()` reads on and resolves
 * with whether the answer arrived whole (a cut connection ends it incomplete).
 */
function stoppedReader(url: string): { status: Promise<number>; resume: () => Promise<boolean> } {
  const { response } = pausedCompletion(url, '{"prompt":"an endless answer","stream":true}');
  return {
    status: response.then((res) => res.statusCode ?? 0),
    resume: async () => {
      const res = await response;
      return new Promise<boolean>((resolve) => {
        res.on("close", () => resolve(res.complete));
        res.resume();
      });
    },
  };
}

describe("client write stall (--client-stall-secs)", () => {
  const started = startedPerTest();

  it("clients that stop reading are cut after --client-stall-secs: the upstream streams end and the slots are free", async () => {
    const { tiny, state } = await endlessUpstream();
    started.tiny = [tiny];
    const { router, accessLog } = await startLoggedRouter({
      workerUrls: [tiny.url],
      clientStallSecs: 0.5,
      requestTimeoutSecs: 1800,
    });
    started.router = router;
    const clients = Array.from({ length: 5 }, () => stoppedReader(router.url));
    const worker = router.context.registry.list()[0]!;
    await waitFor(
      () => state.closed === 5,
      20_000,
      () => `upstream closed: ${state.closed}/5`,
    );
    expect(state.open).toBe(0);
    expect(worker.inFlight).toBe(0);
    // The clients got their 200, then were cut: nothing more could reach them.
    expect(await Promise.all(clients.map((c) => c.status))).toEqual([200, 200, 200, 200, 200]);
    expect(await Promise.all(clients.map((c) => c.resume()))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    await waitFor(() => accessLog().filter((l) => l.error === "client_stall").length === 5, 5000);
    expect(worker.breaker.consecutiveFailures).toBe(0);
  }, 30_000);
});
