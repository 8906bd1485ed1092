/**
 * Issue 10 item 12: places where behaviour and docs/reliability.md disagreed. Each test failed
 * before the fix.
 */
import { request as httpRequest, type IncomingHttpHeaders } from "node:http";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { waitFor } from "../helpers/router.js";
import {
  chat,
  metric,
  okCompletion,
  sseData,
  startedPerTest,
  startLoggedRouter,
  startTinyUpstream,
} from "./support.js";

describe("docs and behaviour agree", () => {
  const started = startedPerTest();

  it("a 4xx during half-open does not close the breaker (4xx is neutral)", async () => {
    let answer = 500;
    const worker = await startTinyUpstream((_req, res) => {
      res.writeHead(answer, { "content-type": "application/json" });
      res.end('{"error":{"message":"scripted"}}');
    });
    started.tiny = [worker];
    const logged = await startLoggedRouter({
      workerUrls: [worker.url],
      cbFailureThreshold: 1,
      cbTimeoutSecs: 0.2,
      retryMaxAttempts: 1,
    });
    started.router = logged.router;
    const breaker = logged.router.context.registry.list()[0]!.breaker;

    expect((await chat(logged.router.url, "break it")).status).toBe(500);
    expect(breaker.state).toBe("open");
    await waitFor(() => breaker.state === "half_open", 3000, "half-open");

    answer = 400;
    for (let i = 0; i < 3; i++) {
      const res = await chat(logged.router.url, `bad request ${i}`);
      expect(res.status).toBe(400);
      await res.arrayBuffer();
    }
    // Bad requests say nothing about the worker: still on trial, trial slot free again.
    expect(breaker.state).toBe("half_open");
    expect(breaker.admits()).toBe(true);

    answer = 200;
    worker.hits.length = 0;
    // Only real successes close it (two of them).
    await (await chat(logged.router.url, "fine 1")).arrayBuffer();
    await (await chat(logged.router.url, "fine 2")).arrayBuffer();
    expect(breaker.state).toBe("closed");
  });

  it("a client that disconnects mid-stream is logged and counted as 499, not 200", async () => {
    const slow = await startSimWorker({ id: "slow", timeScale: 1, stepFloorMs: 20 });
    started.sims = [slow];
    const logged = await startLoggedRouter({ workerUrls: [slow.url] });
    started.router = logged.router;

    const controller = new AbortController();
    const res = await chat(
      logged.router.url,
      "a long story",
      { stream: true, max_tokens: 500 },
      { signal: controller.signal },
    );
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await reader.read();
    controller.abort();
    await waitFor(() => logged.accessLog().length === 1, 3000, "the access log line");
    expect(logged.accessLog()[0]).toMatchObject({ status: 499, error: "client_abort" });
    // The worker had accepted the request (200, prefill done): its index keeps the prompt.
    expect(logged.router.context.registry.list()[0]!.indexedChars()).toBeGreaterThan(0);
    expect(await metric(logged.router.url, "radixgate_requests_total", { status: "499" })).toBe(1);
    expect(await metric(logged.router.url, "radixgate_requests_total", { status: "200" })).toBe(0);
  });

  it("when the shutdown grace period runs out, an open SSE stream ends with an SSE error event, not a reset", async () => {
    const stalled = await startTinyUpstream((_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"choices":[{"delta":{"content":"hi"}}]}\n\n');
      // ...and nothing more: the stream is still open when the grace period ends.
    });
    started.tiny = [stalled];
    const logged = await startLoggedRouter({ workerUrls: [stalled.url] });

    const res = await chat(logged.router.url, "stream until shutdown", { stream: true });
    expect(res.status).toBe(200);
    const text = res.text();
    await waitFor(() => stalled.hits.length === 1, 3000, "the stream to start");
    await logged.router.stop(200);

    // The body ends cleanly (a reset would reject text()), with the error event last.
    const events = sseData(await text);
    const last = JSON.parse(events.at(-1)!) as { error: { code: string; type: string } };
    expect(last.error).toMatchObject({ code: "shutting_down", type: "server_error" });
    expect(logged.accessLog().at(-1)).toMatchObject({ error: "shutdown" });
  });

  it("a request still waiting for its worker when the grace period runs out gets 503 shutting_down", async () => {
    const silent = await startSimWorker({ id: "silent", timeScale: 0, faults: { hang: true } });
    started.sims = [silent];
    const logged = await startLoggedRouter({ workerUrls: [silent.url] });

    const pending = chat(logged.router.url, "waiting for headers");
    await waitFor(() => silent.stats().hanging === 1, 3000, "the worker to hold the request");
    await logged.router.stop(200);

    const res = await pending;
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
    // Not the worker's fault.
    expect(logged.router.context.registry.list()[0]!.breaker.consecutiveFailures).toBe(0);
  });

  it("headers named in Connection (hop-by-hop) are not forwarded to workers", async () => {
    let seen: IncomingHttpHeaders | undefined;
    const worker = await startTinyUpstream((req, res) => {
      seen = req.headers;
      okCompletion(res, "w");
    });
    started.tiny = [worker];
    const logged = await startLoggedRouter({ workerUrls: [worker.url] });
    started.router = logged.router;

    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] });
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest(
        `${logged.router.url}/v1/chat/completions`,
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "content-length": Buffer.byteLength(body),
            connection: "keep-alive, X-Hop-Secret",
            "x-hop-secret": "for the router only",
            "x-end-to-end": "kept",
          },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.statusCode ?? 0));
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    expect(status).toBe(200);
    expect(seen?.["x-hop-secret"]).toBeUndefined();
    expect(seen?.["x-end-to-end"]).toBe("kept");
  });

  it("an api_key (or key, token) in the query string is redacted in the access log, and no header reaches it", async () => {
    const worker = await startTinyUpstream((_req, res) => okCompletion(res, "w"));
    started.tiny = [worker];
    const logged = await startLoggedRouter({ workerUrls: [worker.url] });
    started.router = logged.router;

    const res = await fetch(
      `${logged.router.url}/v1/chat/completions?api_key=sk-live-123&token=tok-456&key=k-789&model=m`,
      {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer sk-header-555" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }),
      },
    );
    expect(res.status).toBe(200);
    await res.arrayBuffer();
    const line = logged.accessLog().at(-1) as unknown as { path: string };
    // The access line is written without the redaction paths (logger.ts: accessLogger): it must
    // carry no header at all, so no credential can ride along.
    expect(JSON.stringify(line)).not.toMatch(/sk-header-555|authorization|headers/i);
    expect(line.path).toBe(
      "/v1/chat/completions?api_key=[redacted]&token=[redacted]&key=[redacted]&model=m",
    );
    expect(JSON.stringify(logged.accessLog())).not.toMatch(/sk-live-123|tok-456|k-789/);
  });
});
