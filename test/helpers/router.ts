import { type Config, type ConfigOverrides, configWith } from "../../src/config.js";
import { createLogger, type Logger } from "../../src/logger.js";
import { type RunningRouter, type StartOptions, startRouter } from "../../src/server.js";

/** A router on 127.0.0.1, a free port, silent, with no background timers (health checks, eviction, engine polling) unless asked for. */
export async function startTestRouter(
  overrides: ConfigOverrides = {},
  logger: Logger = createLogger({ level: "silent" }),
  options: Omit<StartOptions, "logger"> = {},
): Promise<RunningRouter> {
  const config: Config = configWith({
    host: "127.0.0.1",
    port: 0,
    logLevel: "silent",
    healthCheckIntervalSecs: 0,
    // Engine polling adds requests and log lines to every test; the introspection tests turn it on.
    enginePollIntervalSecs: 0,
    evictionIntervalSecs: 0,
    retryInitialBackoffMs: 1,
    retryMaxBackoffMs: 20,
    shutdownGraceSecs: 2,
    ...overrides,
  });
  return startRouter(config, { ...options, logger });
}

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** A short chat completion (2 tokens) sent to `router`: a system prompt, then one user question. */
export function postChat(
  router: { readonly url: string },
  system: string,
  question: string,
  model = "m",
): Promise<Response> {
  return postJson(`${router.url}/v1/chat/completions`, {
    model,
    messages: [
      { role: "system", content: system },
      { role: "user", content: question },
    ],
    max_tokens: 2,
  });
}

/** Polls until `check` returns true or the time is up (no fixed sleeps in tests). */
export async function waitFor(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
  what: string | (() => string) = "condition",
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${typeof what === "string" ? what : what()}`);
}

/** The match rate in a response's x-radixgate-route header (`...;match=0.97`). */
export function matchRate(res: Response): number {
  const route = res.headers.get("x-radixgate-route") ?? "";
  const m = /match=(\d\.\d\d)/.exec(route);
  if (!m) throw new Error(`no match rate in "${route}"`);
  return Number(m[1]);
}
