/**
 * --data-plane nginx end to end: a real nginx (with njs) in front of simulated engines, radixgate
 * deciding. Skipped only where nginx or njs is not installed, never under CI (.ci/run installs them).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { runCli, SERVE_LOCALLY } from "../helpers/cli.js";
import { killChild } from "../helpers/kill-child.js";
import { nginxWithNjs } from "../helpers/nginx.js";
import { postJson, startTestRouter, waitFor } from "../helpers/router.js";

const HAVE_NGINX = nginxWithNjs();

/** The fields these tests read of an answer's JSON. */
type Answer = { object?: string; meta_info?: unknown; error: { code: string } };

const chat = (content: string, extra: Record<string, unknown> = {}) => ({
  model: "m",
  messages: [{ role: "user", content }],
  max_tokens: 3,
  ...extra,
});

/** Every worker's in-flight count is back to 0 and no attempt waits for its completion record. */
async function settled(router: RunningRouter): Promise<void> {
  await waitFor(
    () =>
      router.context.registry.list().every((w) => w.inFlight === 0) &&
      router.nginx?.relays.pending === 0 &&
      router.context.state.active === 0,
    5000,
    () =>
      `in flight ${router.context.registry.list().map((w) => w.inFlight)}, pending ${router.nginx?.relays.pending}`,
  );
}

/** A chat request the test can abort; settles (never rejects) when it ends or is aborted. */
function abortableChat(router: RunningRouter, content: string, signal: AbortSignal, extra = {}) {
  return fetch(`${router.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(chat(content, extra)),
    signal,
  }).catch(() => undefined);
}

/** Listens on a free loopback port: the server's URL, and a close that drops its connections. */
async function listenLocal(server: Server): Promise<{ url: string; close(): void }> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** A "worker" whose health check passes but which drops every inference connection unanswered. */
async function droppingWorker(): Promise<{ url: string; posts: () => number; close(): void }> {
  let posts = 0;
  const server: Server = createServer((req, res) => {
    if (req.method === "POST") {
      posts += 1;
      req.socket.destroy();
      return;
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end("{}");
  });
  return { ...(await listenLocal(server)), posts: () => posts };
}

describe.skipIf(!HAVE_NGINX)("--data-plane nginx", () => {
  let a: SimWorker;
  let b: SimWorker;
  let router: RunningRouter;

  beforeAll(async () => {
    a = await startSimWorker({ id: "a", timeScale: 0 });
    b = await startSimWorker({ id: "b", timeScale: 0 });
    router = await startTestRouter({
      workerUrls: [a.url],
      dataPlane: "nginx",
      policy: "round_robin",
    });
  });
  afterAll(async () => {
    await router?.stop(100);
    await a?.close();
    await b?.close();
  });

  it("relays chat and completions, streaming or not, and /generate, and the counts return to 0", async () => {
    const plain = await postJson(`${router.url}/v1/chat/completions`, chat("hello there"));
    expect(plain.status).toBe(200);
    expect(plain.headers.get("server")).toMatch(/nginx/);
    expect(plain.headers.get("x-radixgate-worker")).toBe(router.context.registry.list()[0]?.id);
    expect(plain.headers.get("x-request-id")).toBeTruthy();
    expect(((await plain.json()) as Answer).object).toBe("chat.completion");

    const streamed = await postJson(
      `${router.url}/v1/chat/completions`,
      chat("hello again", { stream: true, stream_options: { include_usage: true } }),
    );
    expect(streamed.headers.get("content-type")).toMatch(/text\/event-stream/);
    const text = await streamed.text();
    expect(text).toContain("chat.completion.chunk");
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);

    const completion = await postJson(`${router.url}/v1/completions`, {
      model: "m",
      prompt: "once upon a time",
      max_tokens: 3,
    });
    expect(((await completion.json()) as Answer).object).toBe("text_completion");
    const completionStream = await postJson(`${router.url}/v1/completions`, {
      model: "m",
      prompt: "once upon a time",
      max_tokens: 3,
      stream: true,
    });
    expect(await completionStream.text()).toContain("data: [DONE]");

    const generate = await postJson(`${router.url}/generate`, {
      text: "the generate endpoint",
      sampling_params: { max_new_tokens: 3 },
    });
    expect(generate.status).toBe(200);
    expect(((await generate.json()) as Answer).meta_info).toBeDefined();

    // The same long prompt twice: the engine reports the second one's prompt as cached.
    const long = "a long shared system prompt for the cache ".repeat(20);
    for (let i = 0; i < 2; i++)
      await (await postJson(`${router.url}/v1/chat/completions`, chat(long))).text();

    await settled(router);
    // The engines' token counts came back through the completion log: the feedback saw them.
    const metrics = await (await fetch(`${router.url}/metrics`)).text();
    expect(metrics).toMatch(/radixgate_engine_prompt_tokens_total\{[^}]*\} [1-9]/);
    expect(metrics).toMatch(/radixgate_engine_cached_tokens_total\{[^}]*\} [1-9]/);
  });

  it("answers a refusal with the router's OpenAI error body", async () => {
    const res = await postJson(`${router.url}/v1/chat/completions`, "{not json");
    expect(res.status).toBe(400);
    expect(((await res.json()) as Answer).error.code).toBeTruthy();
    const wrongType = await fetch(`${router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "text/plain" },
      body: "hello",
    });
    expect(wrongType.status).toBe(415);
    expect(((await wrongType.json()) as Answer).error.code).toBe("unsupported_media_type");
    // The decision endpoint is not reachable from outside.
    expect((await postJson(`${router.url}/_radixgate/decide?p=/generate`, {})).status).toBe(404);
  });

  it("takes a worker added through the admin API without reloading nginx, and forgets a removed one", async () => {
    const pid = router.nginx?.nginxPid;
    const added = await postJson(`${router.url}/workers`, { url: b.url });
    expect(added.status).toBeLessThan(300);
    await waitFor(() => router.context.registry.list().some((w) => w.url === b.url && w.available));
    for (let i = 0; i < 4; i++) {
      const res = await postJson(`${router.url}/v1/chat/completions`, chat(`turn ${i}`));
      expect(res.status).toBe(200);
      await res.text();
    }
    expect(b.stats().completed).toBeGreaterThan(0);
    expect(router.nginx?.nginxPid).toBe(pid);
    expect(router.nginx?.nginxStarts).toBe(1);
    const id = router.context.registry.list().find((w) => w.url === b.url)?.id;
    const removed = await fetch(`${router.url}/workers/${id}`, { method: "DELETE" });
    expect(removed.status).toBeLessThan(300);
    const before = b.stats().requests;
    for (let i = 0; i < 3; i++)
      await (await postJson(`${router.url}/v1/chat/completions`, chat(`after ${i}`))).text();
    expect(b.stats().requests).toBe(before);
    await settled(router);
  });

  it("retries on another worker when one fails before the first byte", async () => {
    const bad = await droppingWorker();
    try {
      await postJson(`${router.url}/workers`, { url: bad.url });
      await waitFor(() =>
        router.context.registry.list().some((w) => w.url === bad.url && w.available),
      );
      for (let i = 0; i < 4; i++) {
        const res = await postJson(`${router.url}/v1/chat/completions`, chat(`retry ${i}`));
        expect(res.status).toBe(200);
        expect(res.headers.get("x-radixgate-worker")).not.toBe(
          router.context.registry.list().find((w) => w.url === bad.url)?.id,
        );
        await res.text();
      }
      expect(bad.posts()).toBeGreaterThan(0);
      await settled(router);
    } finally {
      const id = router.context.registry.list().find((w) => w.url === bad.url)?.id;
      if (id !== undefined) await fetch(`${router.url}/workers/${id}`, { method: "DELETE" });
      bad.close();
    }
  });

  it("cancels the worker's request when the client disconnects", async () => {
    a.setFaults({ hang: true });
    try {
      const aborted = a.stats().aborted;
      const client = new AbortController();
      const request = abortableChat(router, "hang up", client.signal, { stream: true });
      await waitFor(() => a.stats().hanging === 1);
      client.abort();
      await request;
      await waitFor(() => a.stats().aborted > aborted, 5000, "the worker to see the disconnect");
      // The completion record (499) ends the attempt: nothing is left in flight.
      await settled(router);
    } finally {
      a.setFaults({ hang: false });
    }
  });

  it("restarts nginx when it is killed", async () => {
    const pid = router.nginx?.nginxPid as number;
    process.kill(pid, "SIGKILL");
    await waitFor(() => router.nginx?.nginxStarts === 2 && router.nginx.nginxReady === true);
    expect(router.nginx?.nginxPid).not.toBe(pid);
    const res = await postJson(`${router.url}/v1/chat/completions`, chat("after the restart"));
    expect(res.status).toBe(200);
    await res.text();
    await settled(router);
  });
});

describe.skipIf(!HAVE_NGINX)("--data-plane nginx admission", () => {
  it("holds a request while the router is at its limit and releases it when a slot frees", async () => {
    const sim = await startSimWorker({ id: "s", timeScale: 0 });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      dataPlane: "nginx",
      maxConcurrentRequests: 1,
      queueSize: 4,
    });
    try {
      sim.setFaults({ hang: true });
      const first = new AbortController();
      const holding = abortableChat(router, "first", first.signal);
      await waitFor(() => sim.stats().hanging === 1);
      const second = postJson(`${router.url}/v1/chat/completions`, chat("second"));
      await waitFor(() => router.context.admission.queue.waiting === 1);
      expect(sim.stats().requests).toBe(1);
      sim.setFaults({ hang: false });
      first.abort();
      await holding;
      const res = await second;
      expect(res.status).toBe(200);
      await res.text();
      await settled(router);
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});

describe.skipIf(!HAVE_NGINX)("--data-plane nginx lost records", () => {
  it("expires an attempt whose completion record never comes at --request-timeout-secs", async () => {
    const sim = await startSimWorker({ id: "l", timeScale: 0 });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      dataPlane: "nginx",
      requestTimeoutSecs: 1,
    });
    const client = new AbortController();
    try {
      sim.setFaults({ hang: true });
      const request = abortableChat(router, "never answered", client.signal);
      await waitFor(() => router.nginx?.relays.pending === 1);
      // nginx still holds the request (the worker hangs), so no record comes: the timer ends it.
      await settled(router);
      expect(sim.stats().hanging).toBe(1);
      client.abort();
      await request;
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });
});

describe.skipIf(!HAVE_NGINX)("--data-plane nginx supervision", () => {
  // The CLI starts through tsx: slow on a busy machine.
  it("leaves no nginx behind when radixgate is killed", { timeout: 60_000 }, async () => {
    const sim = await startSimWorker({ id: "k", timeScale: 0 });
    const { child } = runCli([...SERVE_LOCALLY, "--data-plane", "nginx", "--worker-urls", sim.url]);
    try {
      let out = "";
      child.stdout?.on("data", (d) => (out += d));
      child.stderr?.on("data", (d) => (out += d));
      await waitFor(
        () => /"nginx_pid":\d+/.test(out),
        50_000,
        () => `nginx to start: ${out}`,
      );
      const pid = Number(/"nginx_pid":(\d+)/.exec(out)?.[1]);
      const alive = () => {
        try {
          process.kill(pid, 0);
          return true;
        } catch {
          return false;
        }
      };
      expect(alive()).toBe(true);
      await killChild(child);
      await waitFor(() => !alive(), 5000, "nginx to exit after radixgate");
    } finally {
      if (child.exitCode === null && child.signalCode === null) await killChild(child);
      await sim.close();
    }
  });
});

/** A worker that keeps each inference body it receives, byte for byte, and answers a completion. */
async function recordingWorker(): Promise<{ url: string; bodies: Buffer[]; close(): void }> {
  const bodies: Buffer[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method === "POST") bodies.push(Buffer.concat(chunks));
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        req.method === "POST"
          ? JSON.stringify({ object: "chat.completion", choices: [], usage: { prompt_tokens: 3 } })
          : "{}",
      );
    });
  });
  return { ...(await listenLocal(server)), bodies };
}

describe.skipIf(!HAVE_NGINX)("--data-plane nginx bodies and refusals", () => {
  it("relays the client's body intact, after a retry too", async () => {
    const bad = await droppingWorker();
    const good = await recordingWorker();
    const router = await startTestRouter({
      workerUrls: [bad.url, good.url],
      dataPlane: "nginx",
      policy: "round_robin",
    });
    try {
      // Larger than one socket read, with multibyte characters and JSON escapes.
      const body = Buffer.from(
        JSON.stringify(chat(`é€😀 "quoted" \\ ${"0123456789".repeat(20_000)}`)),
        "utf8",
      );
      for (let i = 0; i < 2; i++) {
        const res = await postJson(`${router.url}/v1/chat/completions`, body.toString("utf8"));
        expect(res.status).toBe(200);
        await res.text();
      }
      // One of the two went to the dropping worker first and was retried on the good one.
      expect(bad.posts()).toBeGreaterThan(0);
      expect(good.bodies).toHaveLength(2);
      for (const got of good.bodies) expect(got.equals(body)).toBe(true);
      await settled(router);
    } finally {
      await router.stop(100);
      bad.close();
      good.close();
    }
  });

  it("sends the body radixgate rewrote (the engine's priority)", async () => {
    const sim = await startSimWorker({ id: "p", flavor: "sglang", timeScale: 0, model: "m" });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      dataPlane: "nginx",
      enginePriority: true,
      enginePollIntervalSecs: 60,
    });
    try {
      const worker = router.context.registry.get(sim.url);
      await waitFor(() => worker?.signals.engine === "sglang", 5000, "engine kind read");
      const res = await postJson(`${router.url}/v1/chat/completions`, chat("first"), {
        "x-priority": "40",
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as Answer).object).toBe("chat.completion");
      expect(sim.stats().lastPriority).toBe(40);
      const streamed = await postJson(
        `${router.url}/generate`,
        { text: "hello", sampling_params: { max_new_tokens: 2 }, stream: true },
        { "x-priority": "-3" },
      );
      expect(streamed.status).toBe(200);
      await streamed.text();
      expect(sim.stats().lastPriority).toBe(-3);
      await settled(router);
    } finally {
      await router.stop(100);
      await sim.close();
    }
  });

  it("passes a refusal through with its status, body and Retry-After, and a client leaving the queue cancels its request", async () => {
    const sim = await startSimWorker({ id: "q", timeScale: 0 });
    const router = await startTestRouter({
      workerUrls: [sim.url],
      dataPlane: "nginx",
      maxConcurrentRequests: 1,
      queueSize: 1,
    });
    const first = new AbortController();
    try {
      sim.setFaults({ hang: true });
      const holding = abortableChat(router, "first", first.signal);
      await waitFor(() => sim.stats().hanging === 1);
      const second = new AbortController();
      const queued = abortableChat(router, "second", second.signal);
      await waitFor(() => router.context.admission.queue.waiting === 1);
      // The queue is full: the third is refused as on the Node.js data plane.
      const refused = await postJson(`${router.url}/v1/chat/completions`, chat("third"));
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(refused.headers.get("content-type")).toMatch(/application\/json/);
      expect(((await refused.json()) as Answer).error.code).toBeTruthy();
      // The queued client goes away: nginx closes its decision call, and it leaves the queue.
      second.abort();
      await queued;
      await waitFor(() => router.context.admission.queue.waiting === 0, 5000, "queue to empty");
      sim.setFaults({ hang: false });
      first.abort();
      await holding;
      await settled(router);
      expect(sim.stats().requests).toBe(1);
    } finally {
      first.abort();
      await router.stop(100);
      await sim.close();
    }
  });
});

/**
 * A worker whose answers carry their token counts where engines put them: at the end of a large
 * JSON answer, after a `null` of the same key; and in a stream's final usage event, written in
 * pieces so that nginx reads it in more than one buffer.
 */
async function countingWorker(): Promise<{ url: string; close(): void }> {
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST") {
        res.writeHead(200, { "content-type": "application/json" });
        res.end("{}");
        return;
      }
      const stream = (JSON.parse(Buffer.concat(chunks).toString()) as { stream?: boolean }).stream;
      if (!stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            object: "chat.completion",
            note: { prompt_tokens: null },
            choices: [{ message: { content: "x".repeat(40_000) } }],
            usage: {
              prompt_tokens: 7,
              completion_tokens: 3,
              prompt_tokens_details: { cached_tokens: 5 },
            },
          }),
        );
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream" });
      const event = (data: unknown) => `data: ${JSON.stringify(data)}\n\n`;
      const pieces = [
        event({ choices: [{ delta: { content: "a" } }], usage: null }),
        event({ choices: [{ delta: { content: "b" } }], usage: null }),
        'data: {"choices":[],"usage":{"prompt_t',
        'okens" : 11, "completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}\n\n',
        "data: [DONE]\n\n",
      ];
      const next = () => {
        const piece = pieces.shift();
        if (piece === undefined) res.end();
        else res.write(piece, () => setTimeout(next, 5));
      };
      next();
    });
  });
  return listenLocal(server);
}

describe.skipIf(!HAVE_NGINX)("--data-plane nginx token counts", () => {
  it("reads the engine's counts at the end of a large answer and of a stream read in pieces", async () => {
    const worker = await countingWorker();
    const router = await startTestRouter({ workerUrls: [worker.url], dataPlane: "nginx" });
    try {
      const plain = await postJson(`${router.url}/v1/chat/completions`, chat("counted"));
      expect((await plain.text()).length).toBeGreaterThan(40_000);
      const streamed = await postJson(
        `${router.url}/v1/chat/completions`,
        chat("counted", { stream: true, stream_options: { include_usage: true } }),
      );
      expect(await streamed.text()).toContain("[DONE]");
      await settled(router);
      const metrics = await (await fetch(`${router.url}/metrics`)).text();
      const total = (name: string) =>
        [...metrics.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\d+)`, "gm"))].reduce(
          (sum, m) => sum + Number(m[1]),
          0,
        );
      expect(total("radixgate_engine_prompt_tokens_total")).toBe(18);
      expect(total("radixgate_engine_cached_tokens_total")).toBe(9);
    } finally {
      await router.stop(100);
      worker.close();
    }
  });
});

describe.skipIf(!HAVE_NGINX)("--data-plane nginx Responses API", () => {
  it("a follow-up naming previous_response_id reaches the worker holding the response, streamed or not", async () => {
    const sims = await Promise.all(
      ["n1", "n2", "n3"].map((id) => startSimWorker({ id, timeScale: 0 })),
    );
    // round_robin: without the holder learned from nginx's record, a follow-up would move on.
    const router = await startTestRouter({
      workerUrls: sims.map((s) => s.url),
      dataPlane: "nginx",
      policy: "round_robin",
    });
    try {
      for (const stream of [false, true]) {
        const first = await postJson(`${router.url}/v1/responses`, {
          model: "m",
          input: `Tell me a story (${stream ? "streamed" : "whole"}).`,
          max_output_tokens: 4,
          stream,
        });
        expect(first.status).toBe(200);
        const holder = first.headers.get("x-radixgate-worker");
        const id = /"id"\s*:\s*"(resp[^"]+)"/.exec(await first.text())?.[1];
        expect(id).toBeDefined();
        await waitFor(
          () => router.context.responseHolders.holder(id as string) !== undefined,
          5000,
          "nginx's record of the response's worker",
        );
        for (let turn = 0; turn < 3; turn++) {
          const next = await postJson(`${router.url}/v1/responses`, {
            model: "m",
            input: "And then?",
            previous_response_id: id,
            max_output_tokens: 2,
          });
          expect(next.status).toBe(200);
          expect(next.headers.get("x-radixgate-worker")).toBe(holder);
          await next.text();
        }
      }
      await settled(router);
    } finally {
      await router.stop(100);
      await Promise.all(sims.map((s) => s.close()));
    }
  });
});
