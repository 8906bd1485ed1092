import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { type Demo, startDemo } from "../../scripts/demo.js";
import { freePort } from "../../sim/free-port.js";
import { redisSkipReason } from "../helpers/redis.js";
import { waitFor } from "../helpers/router.js";

const demos: Demo[] = [];
const servers: Server[] = [];

afterEach(async () => {
  await Promise.all(demos.splice(0).map((d) => d.stop()));
  await Promise.all(
    servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
  );
});

async function chat(url: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

const MESSAGES = [
  { role: "system", content: "You are the radixgate demo assistant. ".repeat(20) },
  { role: "user", content: "Hello" },
];

describe("npm run demo (startDemo)", () => {
  it("starts a fleet behind the router and answers a chat completion", async () => {
    const demo = await startDemo({ port: 0, quiet: true, timeScale: 0.01 });
    demos.push(demo);
    expect(demo.workers).toHaveLength(4);

    const res = await chat(demo.url, { messages: MESSAGES, max_tokens: 8 });
    expect(res.status).toBe(200);
    const json = (await res.json()) as {
      choices: { message: { role: string; content: string } }[];
      usage: { completion_tokens: number };
    };
    expect(json.choices[0]?.message.role).toBe("assistant");
    expect(json.choices[0]?.message.content.length).toBeGreaterThan(0);
    expect(json.usage.completion_tokens).toBe(8);

    const status = demo.status();
    expect(Object.values(status.requests).reduce((a, b) => a + b, 0)).toBe(1);
    expect(status.promptTokens).toBeGreaterThan(0);
  });

  it("sends a repeated prompt to the worker that cached it, so the fleet hit rate rises", async () => {
    const demo = await startDemo({ port: 0, quiet: true, timeScale: 0.01 });
    demos.push(demo);
    for (let i = 0; i < 3; i++) {
      const res = await chat(demo.url, { messages: MESSAGES, max_tokens: 4 });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    const status = demo.status();
    expect(Object.values(status.requests).sort()).toEqual([0, 0, 0, 3]);
    expect(status.hitRate).toBeGreaterThan(0.5);
  });

  it("streams a chat completion through the router", async () => {
    const demo = await startDemo({ port: 0, quiet: true, timeScale: 0.01 });
    demos.push(demo);
    const res = await chat(demo.url, { messages: MESSAGES, max_tokens: 3, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
  });

  it("falls back to a free port, saying so, when the requested port is taken", async () => {
    const blocker = createServer();
    servers.push(blocker);
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const taken = (blocker.address() as AddressInfo).port;
    const lines: string[] = [];
    const demo = await startDemo({ port: taken, timeScale: 0.01, print: (l) => lines.push(l) });
    demos.push(demo);
    expect(demo.port).not.toBe(taken);
    expect(lines.join("\n")).toMatch(new RegExp(`${taken}.*already in use.*free port`));
    expect(lines.join("\n")).toContain(`router   ${demo.url}`);
    expect(lines.join("\n")).toContain(`curl -N ${demo.url}/v1/chat/completions`);
  });

  it("labels each worker with the router's id: the banner, the status line, x-radixgate-worker and /workers agree (issue 19 item 8)", async () => {
    const lines: string[] = [];
    const demo = await startDemo({
      port: 0,
      timeScale: 0.01,
      workers: 2,
      statsIntervalSecs: 3600,
      print: (l) => lines.push(l),
    });
    demos.push(demo);
    const banner = [...lines.join("\n").matchAll(/^ {2}worker {3}(\S+) {2}(http:\S+)$/gm)];
    const shown = new Map(banner.map((m) => [m[1] as string, m[2] as string]));
    const listed = (await (await fetch(`${demo.url}/workers`)).json()) as {
      workers: { id: string; url: string }[];
    };
    expect(shown).toEqual(new Map(listed.workers.map((w) => [w.id, w.url])));
    const res = await chat(demo.url, { messages: MESSAGES, max_tokens: 2 });
    const served = res.headers.get("x-radixgate-worker") as string;
    await res.arrayBuffer();
    expect(shown.has(served)).toBe(true);
    expect(demo.status().requests[served]).toBe(1);
    expect(Object.keys(demo.status().requests).sort()).toEqual([...shown.keys()].sort());
  });

  it("--worker-ports puts the workers on the ports given, and the banner shows them (issue 19 item 8)", async () => {
    const ports = [await freePort(), await freePort()];
    const lines: string[] = [];
    const demo = await startDemo({
      port: 0,
      timeScale: 0.01,
      workerPorts: ports,
      print: (l) => lines.push(l),
    });
    demos.push(demo);
    expect(demo.workers.map((w) => w.port)).toEqual(ports);
    for (const port of ports) expect(lines.join("\n")).toContain(`http://127.0.0.1:${port}`);
    await expect(
      startDemo({ port: 0, quiet: true, workers: 3, workerPorts: ports }),
    ).rejects.toThrow(/--worker-ports lists 2 ports for 3 workers/);
  });

  it("--traffic: background requests reach the fleet, and stop() ends everything cleanly", async () => {
    const demo = await startDemo({ port: 0, quiet: true, timeScale: 0.01, trafficRate: 200 });
    const served = () => Object.values(demo.status().requests).reduce((a, b) => a + b, 0);
    await waitFor(() => served() >= 5, 10_000, "background traffic");
    await demo.stop();
    await demo.stop();
    await expect(fetch(`${demo.url}/health`)).rejects.toThrow();
  });

  it.skipIf(redisSkipReason !== undefined)(
    `--replicas 2: two routers and a redis-server, the first deciding for both; the second knows where the first sent a prompt${redisSkipReason ? ` (skipped: ${redisSkipReason})` : ""}`,
    async () => {
      const demo = await startDemo({ port: 0, quiet: true, timeScale: 0, replicas: 2, workers: 3 });
      demos.push(demo);
      expect(demo.routers).toHaveLength(2);
      expect(demo.redis?.url).toMatch(/^redis:\/\/127\.0\.0\.1:\d+\/0$/);
      const [first, second] = demo.routers;
      // Each says where it listens, so the second defers to the first, which decides for both.
      await waitFor(
        () => second!.context.replication?.relayTarget() === first!.url,
        10_000,
        "the second replica deferring to the first",
      );
      const res = await chat(first!.url, { messages: MESSAGES, max_tokens: 2 });
      const worker = res.headers.get("x-radixgate-worker")!;
      await res.text();
      await waitFor(
        () => second!.context.index.size(worker) > 0,
        10_000,
        "the second replica learns",
      );
      const again = await chat(second!.url, { messages: MESSAGES, max_tokens: 2 });
      expect(again.headers.get("x-radixgate-worker")).toBe(worker);
      await again.text();
    },
  );
});
