/**
 * Issue 10 item 9 and issue 13 item 5: one worker, one registration whatever the spelling;
 * link-local and metadata addresses refused unless allowed; a base URL ending in /v1 works.
 */
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { configFromArgv as nestedFromArgv } from "../../src/cli-options.js";
import { configWith, flagValues } from "../../src/config.js";
import { ConfigError, RouterError } from "../../src/errors.js";
import { createLogger } from "../../src/logger.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import { guardedLookup, LINK_LOCAL_REFUSED } from "../../src/workers/guarded-lookup.js";
import { WorkerRegistry } from "../../src/workers/registry.js";
import {
  isLinkLocalIp,
  linkLocalReason,
  normalizeWorkerUrl,
} from "../../src/workers/worker-url.js";
import { runCli } from "../helpers/cli.js";
import { postJson, startTestRouter } from "../helpers/router.js";

/** The parsed configuration by setting name, in the flags' units. */
const configFromArgv = (argv: string[]) => flagValues(nestedFromArgv(argv));

function registry(allowLinkLocal = false): WorkerRegistry {
  return new WorkerRegistry(
    {
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 2 },
      connectTimeoutMs: 1000,
    },
    { allowLinkLocal },
  );
}

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof RouterError ? err.code : String(err);
  }
  return undefined;
}

describe("worker registration", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.splice(0).map((f) => f()));
  });

  it.each([
    ["http://[::ffff:7f00:1]:8000", "http://127.0.0.1:8000"],
    ["http://[::ffff:127.0.0.1]:8000/", "http://127.0.0.1:8000"],
    ["http://[::FFFF:7F00:1]:8000", "http://127.0.0.1:8000"],
    ["http://2130706433:8000", "http://127.0.0.1:8000"],
    ["http://GPU1.Example.COM.:8000", "http://gpu1.example.com:8000"],
    ["http://gpu1:80/", "http://gpu1"],
    ["https://gpu1:443", "https://gpu1"],
    ["http://gpu1:8000//", "http://gpu1:8000"],
    ["http://[0:0:0:0:0:0:0:1]:8000", "http://[::1]:8000"],
  ])("canonicalises %s to %s", (spelling, canonical) => {
    expect(normalizeWorkerUrl(spelling)).toBe(canonical);
  });

  it("refuses a second registration of one worker under another spelling (worker_exists)", () => {
    const r = registry();
    r.add("http://127.0.0.1:8000");
    for (const spelling of [
      "http://[::ffff:7f00:1]:8000",
      "http://[::ffff:127.0.0.1]:8000/",
      "http://127.0.0.1:8000/v1",
    ]) {
      expect(codeOf(() => r.add(spelling))).toBe("worker_exists");
    }
    expect(r.size).toBe(1);
  });

  it.each([
    "http://169.254.169.254",
    "http://169.254.10.1:8000",
    "http://[fe80::1]:8000",
    "http://[febf::1]:8000",
    "http://[::ffff:169.254.169.254]",
    "http://metadata.google.internal",
    "http://[fd00:ec2::254]",
  ])("refuses the link-local or metadata address %s unless --allow-link-local-workers", (url) => {
    expect(codeOf(() => registry().add(url))).toBe("invalid_worker_url");
    expect(codeOf(() => registry(true).add(url))).toBeUndefined();
  });

  it("refuses an endpoint URL pasted as a worker, with a message that says what to give", () => {
    expect(() => normalizeWorkerUrl("http://gpu1:8000/v1/chat/completions")).toThrow(
      /endpoint, not a server.*base URL/,
    );
  });

  it("does not mistake ordinary private addresses for link-local ones", () => {
    for (const url of [
      "http://10.0.0.1:8000",
      "http://192.168.1.2",
      "http://[fd00::1]",
      "http://[fec0::1]",
    ]) {
      expect(linkLocalReason(normalizeWorkerUrl(url))).toBeUndefined();
    }
  });

  it("the admin API answers 400 with the flag to use for a metadata address, and nothing is probed", async () => {
    const router = await startTestRouter();
    cleanup.push(() => router.stop(100));
    const res = await postJson(`${router.url}/workers`, { url: "http://169.254.169.254/latest" });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("invalid_worker_url");
    expect(body.error.message).toContain("--allow-link-local-workers");
    expect(router.context.registry.size).toBe(0);
  });

  it("--worker-urls with a link-local address or the router's own address stops start-up with a ConfigError", async () => {
    const base = configWith({
      host: "127.0.0.1",
      logLevel: "silent" as const,
      healthCheckIntervalSecs: 0,
    });
    const logger = createLogger({ level: "silent" });
    await expect(
      startRouter(configWith({ port: 0, workerUrls: ["http://169.254.169.254"] }, base), {
        logger,
      }),
    ).rejects.toBeInstanceOf(ConfigError);
    // Refused before listening, so the port need not be free.
    await expect(
      startRouter(configWith({ port: 30000, workerUrls: ["http://localhost:30000"] }, base), {
        logger,
      }),
    ).rejects.toThrow(/own address/);
  });

  it("a worker URL ending in /v1 is normalised to the server root, so every route reaches it (no 404s)", async () => {
    const sim: SimWorker = await startSimWorker({ id: "v1", timeScale: 0 });
    const router: RunningRouter = await startTestRouter();
    cleanup.push(async () => {
      await router.stop(100);
      await sim.close();
    });
    const added = await postJson(`${router.url}/workers`, { url: `${sim.url}/v1/` });
    expect(added.status).toBe(202);
    expect(((await added.json()) as { url: string }).url).toBe(sim.url);

    const paths: Array<[string, unknown]> = [
      [
        "/v1/chat/completions",
        { model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
      ],
      ["/v1/completions", { model: "m", prompt: "hi", max_tokens: 2 }],
      ["/generate", { text: "hi", sampling_params: { max_new_tokens: 2 } }],
      ["/v1/embeddings", { model: "m", input: "hi" }],
    ];
    for (const [path, body] of paths) {
      const res = await postJson(`${router.url}${path}`, body);
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
    }
    for (const path of ["/v1/models", "/get_model_info", "/get_server_info"]) {
      const res = await fetch(`${router.url}${path}`);
      expect(res.status, path).toBe(200);
      await res.arrayBuffer();
    }
    expect(sim.stats().endpoints.unmatched ?? 0).toBe(0);
  });

  it("--allow-link-local-workers is a flag: alone it means true, and it lets such a worker start", () => {
    expect(configFromArgv([]).allowLinkLocalWorkers).toBe(false);
    expect(configFromArgv(["--allow-link-local-workers"]).allowLinkLocalWorkers).toBe(true);
    expect(
      configFromArgv(["--allow-link-local-workers", "--worker-urls", "http://169.254.1.2:8000"]),
    ).toMatchObject({ allowLinkLocalWorkers: true, workerUrls: ["http://169.254.1.2:8000"] });
    expect(configFromArgv(["--allow-link-local-workers", "false"]).allowLinkLocalWorkers).toBe(
      false,
    );
    expect(() => configFromArgv(["--allow-link-local-workers", "maybe"])).toThrow(ConfigError);
  });

  it("the real CLI exits 2 with one line naming --worker-urls for a metadata address", async () => {
    const { done } = runCli([
      "--port",
      "0",
      "--host",
      "127.0.0.1",
      "--worker-urls",
      "http://169.254.169.254",
    ]);
    const { code, stderr } = await done;
    expect(code).toBe(2);
    expect(stderr).toMatch(
      /^radixgate: error: --worker-urls .*169\.254\.169\.254.*--allow-link-local-workers/,
    );
  }, 30_000);

  it("a worker name that resolves to a link-local address is refused at connect time (DNS is checked too)", async () => {
    type Answer = string | Array<{ address: string; family: number }>;
    const fakeDns =
      (answer: Answer) =>
      (_host: string, _opts: unknown, cb: (e: null, a: Answer, f?: number) => void) =>
        cb(null, answer, 4);
    const run = (answer: Answer, all: boolean) =>
      new Promise<{ code?: string; address?: Answer }>((resolve) =>
        guardedLookup(fakeDns(answer) as never)("evil.example", { all }, (err, address) =>
          resolve(err ? { code: err.code } : { address }),
        ),
      );
    expect(await run("169.254.169.254", false)).toEqual({ code: LINK_LOCAL_REFUSED });
    expect(
      await run(
        [
          { address: "10.0.0.1", family: 4 },
          { address: "fe80::1", family: 6 },
        ],
        true,
      ),
    ).toEqual({ code: LINK_LOCAL_REFUSED });
    expect(await run("10.0.0.7", false)).toEqual({ address: "10.0.0.7" });
    expect(isLinkLocalIp("::ffff:169.254.1.1")).toBe(true);
    expect(isLinkLocalIp("::ffff:a9fe:101")).toBe(true);
    expect(isLinkLocalIp("127.0.0.1")).toBe(false);
  });

  it("a worker registered by name (localhost) still connects through the guarded lookup", async () => {
    const sim = await startSimWorker({ id: "by-name", timeScale: 0 });
    const port = new URL(sim.url).port;
    const router = await startTestRouter({ workerUrls: [`http://localhost:${port}`] });
    cleanup.push(async () => {
      await router.stop(100);
      await sim.close();
    });
    const res = await postJson(`${router.url}/v1/completions`, { prompt: "hi", max_tokens: 1 });
    expect(res.status).toBe(200);
    await res.arrayBuffer();
  });
});
