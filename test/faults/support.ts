/**
 * Shared helpers of the fault-injection tests: a router whose access log can be read, tiny
 * scripted upstreams for answers the simulator cannot give (Retry-After), and small readers for
 * SSE bodies, error codes and Prometheus samples.
 */
import { createServer, type IncomingMessage, request, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach } from "vitest";
import { freePort } from "../../sim/free-port.js";
import type { SimWorker } from "../../sim/worker.js";
import { type Config, type ConfigOverrides, configWith } from "../../src/config.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import { normalizeWorkerUrl, workerIdFor } from "../../src/workers/worker-url.js";
import { captureLogs } from "../helpers/log-capture.js";
import { postJson } from "../helpers/router.js";

/** One access-log line ("request") of the router. */
export interface AccessLog {
  request_id: string;
  endpoint: string;
  status: number;
  attempts: number;
  worker?: string;
  error?: string;
}

/** Like startTestRouter, but the access log is kept in memory for assertions on attempts. */
export async function startLoggedRouter(
  overrides: ConfigOverrides = {},
): Promise<{ router: RunningRouter; accessLog: () => AccessLog[] }> {
  const { logger, entries } = captureLogs<AccessLog & { msg: string }>("info");
  const config: Config = configWith({
    host: "127.0.0.1",
    port: 0,
    logLevel: "info",
    healthCheckIntervalSecs: 0,
    evictionIntervalSecs: 0,
    // Engine polling would add requests to the tiny upstreams that count their hits.
    enginePollIntervalSecs: 0,
    retryInitialBackoffMs: 1,
    retryMaxBackoffMs: 20,
    shutdownGraceSecs: 2,
    ...overrides,
  });
  const router = await startRouter(config, { logger });
  return { router, accessLog: () => entries.filter((e) => e.msg === "request") };
}

export function chat(
  routerUrl: string,
  content: string,
  extra: Record<string, unknown> = {},
  init: { signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(`${routerUrl}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model: "m",
      messages: [{ role: "user", content }],
      max_tokens: 4,
      ...extra,
    }),
    ...init,
  });
}

export function complete(routerUrl: string, prompt: string, maxTokens = 2): Promise<Response> {
  return postJson(`${routerUrl}/v1/completions`, { model: "m", prompt, max_tokens: maxTokens });
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split("\n\n")
    .filter((event) => event.startsWith("data: "))
    .map((event) => event.slice("data: ".length));
}

/** The router's error code of a JSON error response (reads the body). */
export async function errorCode(res: Response): Promise<string | undefined> {
  const body = (await res.json()) as { error?: { code?: string } };
  return body.error?.code;
}

/** Value of one Prometheus sample, 0 when the series is absent. */
export async function metric(
  routerUrl: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const text = await (await fetch(`${routerUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const ok = Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`));
    if (ok) total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** The id the router gives a worker URL: the `worker` label of every per-worker metric. */
export function workerId(url: string): string {
  return workerIdFor(normalizeWorkerUrl(url));
}

/** A URL where nothing listens (a port taken and released at once). */
export async function deadUrl(): Promise<string> {
  return `http://127.0.0.1:${await freePort()}`;
}

/** A scripted upstream on 127.0.0.1 for answers the simulator cannot give. */
export interface TinyUpstream {
  readonly url: string;
  /** Inference requests received (anything but GET /health), with their arrival time. */
  readonly hits: number[];
  close(): Promise<void>;
}

export async function startTinyUpstream(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<TinyUpstream> {
  const hits: number[] = [];
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/health") {
      res.writeHead(200, { "content-length": 0 }).end();
      return;
    }
    hits.push(Date.now());
    // Read the body before answering, like a real server does.
    req.resume();
    req.on("end", () => handler(req, res));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** A minimal OpenAI chat completion, for tiny upstreams that should succeed. */
export function okCompletion(res: ServerResponse, from: string): void {
  const body = JSON.stringify({
    id: `chatcmpl-${from}`,
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: from }, finish_reason: "stop" }],
  });
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
}

/** The router and upstreams one test started; `startedPerTest` closes them after each test. */
export interface Started {
  router: RunningRouter | undefined;
  sims: SimWorker[];
  tiny: TinyUpstream[];
}

/** Call in a describe block: whatever a test puts in the returned object is closed after it. */
export function startedPerTest(): Started {
  const started: Started = { router: undefined, sims: [], tiny: [] };
  afterEach(async () => {
    await started.router?.stop(100);
    await Promise.all([...started.sims, ...started.tiny].map((s) => s.close()));
    started.router = undefined;
    started.sims = [];
    started.tiny = [];
  });
  return started;
}

/**
 * POSTs `body` to /v1/completions the low-level way and gives back the response paused (the
 * client reads nothing until told to), with a way to drop the connection.
 */
export function pausedCompletion(
  url: string,
  body: string,
): { response: Promise<IncomingMessage>; destroy: () => void } {
  const req = request(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
  });
  req.on("error", () => {});
  const response = new Promise<IncomingMessage>((resolve) => {
    req.on("response", (res) => {
      res.pause();
      res.on("error", () => {});
      resolve(res);
    });
  });
  req.end(body);
  return { response, destroy: () => req.destroy() };
}
