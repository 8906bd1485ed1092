import { request } from "node:http";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { startTestRouter, waitFor } from "../helpers/router.js";
import { chat, sseData, startedPerTest, startTinyUpstream } from "./support.js";

type ErrorJson = { error: { code: string; message: string; type: string } };

describe("timeouts", () => {
  const started = startedPerTest();

  it("a worker that hangs: 504 upstream_timeout from the first-byte timeout (not later), and the upstream request is aborted", async () => {
    started.sims = [await startSimWorker({ id: "hang", timeScale: 0, faults: { hang: true } })];
    const sim = started.sims[0]!;
    // Regression: with undici's own headersTimeout (a coarse clock) a 0.3 s first-byte timeout
    // fired after ~1 s, so the 0.8 s request timeout won and the message named the wrong limit.
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      firstByteTimeoutSecs: 0.3,
      requestTimeoutSecs: 0.8,
    });
    const res = await chat(started.router.url, "are you there?");
    expect(res.status).toBe(504);
    expect(res.headers.get("content-type")).toContain("application/json");
    const body = (await res.json()) as ErrorJson;
    expect(body.error).toMatchObject({ code: "upstream_timeout", type: "server_error" });
    expect(body.error.message).toContain("--first-byte-timeout-secs");
    await waitFor(() => sim.stats().hanging === 0, 2000, "the worker to see the abort");
    expect(started.router.context.registry.list()[0]!.inFlight).toBe(0);
  });

  it("the idle timeout fires between stream chunks (not later): the stream ends with an SSE error event", async () => {
    started.sims = [await startSimWorker({ id: "stall", timeScale: 1, stepFloorMs: 10 })];
    const sim = started.sims[0]!;
    // Regression: undici's bodyTimeout fired ~1 s late, after the 0.8 s request timeout.
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      idleTimeoutSecs: 0.3,
      requestTimeoutSecs: 0.8,
    });
    const res = await chat(started.router.url, "then stall", { stream: true, max_tokens: 500 });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(first.done).toBe(false);
    // Each engine step now takes 10 s: the worker goes silent mid-stream.
    sim.setFaults({ slowdown: 1000 });
    let text = new TextDecoder().decode(first.value);
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      text += new TextDecoder().decode(r.value);
    }
    const events = sseData(text);
    expect(events.length).toBeGreaterThan(1);
    const last = JSON.parse(events.at(-1)!) as ErrorJson;
    expect(last.error.code).toBe("upstream_timeout");
    expect(last.error.message).toContain("--idle-timeout-secs");
    await waitFor(() => sim.stats().aborted === 1, 2000, "the worker to see the abort");
    expect(started.router.context.registry.list()[0]!.breaker.consecutiveFailures).toBe(1);
  });

  it("the overall request timeout ends a stream that is still going", async () => {
    started.sims = [await startSimWorker({ id: "long", timeScale: 1, stepFloorMs: 20 })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      requestTimeoutSecs: 0.5,
      idleTimeoutSecs: 0.3,
    });
    const res = await chat(started.router.url, "a very long answer", {
      stream: true,
      max_tokens: 1000,
    });
    expect(res.status).toBe(200);
    const events = sseData(await res.text());
    // Chunks kept coming every 20 ms, so only the overall limit can have ended it.
    expect(events.length).toBeGreaterThan(5);
    const last = JSON.parse(events.at(-1)!) as ErrorJson;
    expect(last.error.code).toBe("upstream_timeout");
    expect(last.error.message).toContain("--request-timeout-secs");
    await waitFor(() => sim.stats().aborted === 1, 2000, "the worker to see the abort");
  });

  it("the overall request timeout bounds a non-streamed wait: 504 JSON", async () => {
    started.sims = [await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 20 })];
    const sim = started.sims[0]!;
    started.router = await startTestRouter({
      workerUrls: [sim.url],
      requestTimeoutSecs: 0.3,
      firstByteTimeoutSecs: 30,
    });
    const res = await chat(started.router.url, "take your time", { max_tokens: 1000 });
    expect(res.status).toBe(504);
    const body = (await res.json()) as ErrorJson;
    expect(body.error.code).toBe("upstream_timeout");
    expect(body.error.message).toContain("--request-timeout-secs");
    await waitFor(() => sim.stats().aborted === 1, 2000, "the worker to see the abort");
  });

  it("a client that reads slowly does not trip the idle timeout (back-pressure is not worker silence)", async () => {
    const size = 12 * 1024 * 1024;
    const big = await startTinyUpstream((_req, res) => {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": size });
      const chunk = Buffer.alloc(64 * 1024, 120);
      let sent = 0;
      const pump = () => {
        while (sent < size) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
        res.end();
      };
      pump();
    });
    started.tiny = [big];
    // The idle period leaves room for a loaded machine to pause the flow once the client reads;
    // the client's pause below is still five of them.
    started.router = await startTestRouter({ workerUrls: [big.url], idleTimeoutSecs: 0.4 });
    const received = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${started.router!.url}/v1/completions`,
        { method: "POST", headers: { "content-type": "application/json" } },
        (res) => {
          let bytes = 0;
          res.pause();
          // Read nothing for 5 idle periods, then everything.
          setTimeout(() => {
            res.on("data", (c: Buffer) => (bytes += c.length));
            res.on("end", () => resolve(bytes));
            res.on("error", reject);
            res.resume();
          }, 2000);
        },
      );
      req.on("error", reject);
      req.end('{"prompt":"a large answer"}');
    });
    expect(received).toBe(size);
    expect(started.router.context.registry.list()[0]!.breaker.consecutiveFailures).toBe(0);
  });
});
