/**
 * One-command demo: a fleet of simulated SGLang workers with the real radixgate router in front.
 *
 *   npm run demo                      router on 127.0.0.1:30000, 4 workers, real-time timing
 *   npm run demo -- --traffic         plus a small background workload, so the hit rate moves
 *   npm run demo -- --port 8080 --workers 8 --policy round_robin
 *   npm run demo -- --replicas 2      two router replicas sharing state through a local redis-server
 *   npm run demo -- --worker-ports 31001,31002   the workers on fixed ports (default: free ones)
 *
 * Prints where it listens, example curl commands, and every few seconds the fleet's prefix-cache
 * hit rate (from the workers' own counters) and requests per worker. Ctrl-C stops it cleanly.
 */
import { randomBytes } from "node:crypto";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { freePort } from "../sim/free-port.js";
import {
  findRedisServer,
  type LocalRedis,
  REDIS_INSTALL_HINT,
  startLocalRedis,
} from "../sim/redis-server.js";
import { type SimWorker, startSimWorker } from "../sim/worker.js";
import { type Config, configWith, defaultConfig } from "../src/config.js";
import { createLogger, LOG_LEVELS, type LogLevel } from "../src/logger.js";
import { POLICY_NAMES, type PolicyName } from "../src/scheduling/policy.js";
import { ListenError, type RunningRouter, startRouter } from "../src/server.js";
import { startTraffic } from "./demo-traffic.js";

export interface DemoOptions {
  /** Router port (default 30000; 0 = any free port). Falls back to a free port when taken. */
  port?: number;
  /** Router address (default 127.0.0.1). */
  host?: string;
  /** Simulated workers (default 4, or as many as `workerPorts`). */
  workers?: number;
  /** The workers' ports, one per worker (default: free ports, printed at start). */
  workerPorts?: readonly number[];
  /** Real ms per model ms of the simulated engines (default 1: real time). */
  timeScale?: number;
  policy?: PolicyName;
  /** Background requests per second, 0 = none (default 0; --traffic sets 4). */
  trafficRate?: number;
  /** Seconds between two status lines (default 5). */
  statsIntervalSecs?: number;
  /** Router log level (default "warn": a line per request would drown the status lines). */
  logLevel?: LogLevel;
  /** Who relays the answers (default node; nginx needs nginx and its njs module, docs/data-planes.md). */
  dataPlane?: "node" | "nginx";
  /**
   * Router replicas (default 1). With 2 or more, a redis-server is started on a free port and the
   * replicas share decisions, load and workers through it (--state-url); without redis-server
   * installed the demo says how to install it and runs one replica.
   */
  replicas?: number;
  /** Print nothing (tests). */
  quiet?: boolean;
  /** Where lines go (default console.log). */
  print?: (line: string) => void;
}

export interface Demo {
  /** The (first) router's base URL. */
  readonly url: string;
  readonly port: number;
  readonly router: RunningRouter;
  /** Every replica, the first being `router`. */
  readonly routers: readonly RunningRouter[];
  /** The redis-server the replicas share, when there are several. */
  readonly redis: LocalRedis | undefined;
  readonly workers: readonly SimWorker[];
  /** Fleet prefix-cache hit rate and requests per worker, from the workers' counters. */
  status(): DemoStatus;
  /** Stops the traffic, the router (gracefully) and the workers. */
  stop(): Promise<void>;
}

export interface DemoStatus {
  promptTokens: number;
  cachedTokens: number;
  hitRate: number;
  /** Requests per worker, keyed by the router's worker id (as in x-radixgate-worker and /workers). */
  requests: Record<string, number>;
  inFlight: number;
}

const DEFAULT_PORT = 30000;
const MODEL = "meta-llama/Llama-3.1-8B-Instruct";

export async function startDemo(o: DemoOptions = {}): Promise<Demo> {
  const print = o.quiet === true ? () => {} : (o.print ?? ((line: string) => console.log(line)));
  const count = o.workers ?? o.workerPorts?.length ?? 4;
  if (o.workerPorts !== undefined && o.workerPorts.length !== count) {
    throw new Error(`--worker-ports lists ${o.workerPorts.length} ports for ${count} workers`);
  }
  const workers: SimWorker[] = [];
  const routers: RunningRouter[] = [];
  let redis: LocalRedis | undefined;
  try {
    for (let i = 1; i <= count; i++) {
      workers.push(
        await startSimWorker({
          id: `w${i}`,
          timeScale: o.timeScale ?? 1,
          model: MODEL,
          ...(o.workerPorts !== undefined ? { port: o.workerPorts[i - 1] as number } : {}),
        }),
      );
    }
    let replicas = o.replicas ?? 1;
    if (replicas > 1 && findRedisServer() === undefined) {
      print(`radixgate demo: ${REDIS_INSTALL_HINT}; running one replica instead of ${replicas}.`);
      replicas = 1;
    }
    if (replicas > 1) redis = await startLocalRedis();
    const first = await startDemoRouter(o, workers, print, redis?.url);
    routers.push(first);
    for (let i = 1; i < replicas; i++) {
      // The next ports up when free, any free port otherwise.
      routers.push(
        await startDemoRouter({ ...o, port: first.port + i }, workers, print, redis?.url),
      );
    }
  } catch (err) {
    await Promise.allSettled(routers.map((r) => r.stop(100)));
    await Promise.allSettled(workers.map((w) => w.close()));
    await redis?.stop();
    throw err;
  }
  const router = routers[0] as RunningRouter;
  // Workers are shown under the router's ids, the ones x-radixgate-worker and /workers give.
  const label = (w: SimWorker) => router.context.registry.get(w.url)?.id ?? w.id;

  const status = (): DemoStatus => {
    const s = workers.map((w) => w.stats());
    const promptTokens = s.reduce((sum, x) => sum + x.promptTokens, 0);
    const cachedTokens = s.reduce((sum, x) => sum + x.cachedTokens, 0);
    return {
      promptTokens,
      cachedTokens,
      hitRate: promptTokens === 0 ? 0 : cachedTokens / promptTokens,
      requests: Object.fromEntries(s.map((x, i) => [label(workers[i] as SimWorker), x.requests])),
      inFlight: s.reduce((sum, x) => sum + x.inFlight, 0),
    };
  };

  printBanner(
    print,
    routers,
    workers.map((w) => [label(w), w.url] as const),
    o,
    redis,
  );
  let last = status();
  const intervalMs = (o.statsIntervalSecs ?? 5) * 1000;
  const timer = setInterval(() => {
    const now = status();
    print(statusLine(now, last));
    last = now;
  }, intervalMs);
  timer.unref();
  const traffic =
    (o.trafficRate ?? 0) > 0
      ? startTraffic(
          routers.map((r) => r.url),
          o.trafficRate as number,
          MODEL,
        )
      : undefined;

  let stopping: Promise<void> | undefined;
  return {
    url: router.url,
    port: router.port,
    router,
    routers,
    redis,
    workers,
    status,
    stop: () => {
      stopping ??= (async () => {
        clearInterval(timer);
        await traffic?.stop();
        await Promise.allSettled(routers.map((r) => r.stop(2000)));
        await Promise.allSettled(workers.map((w) => w.close()));
        await redis?.stop();
      })();
      return stopping;
    },
  };
}

/** The demo replicas' shared --state-secret (new for every run). */
const DEMO_STATE_SECRET = randomBytes(24).toString("hex");

async function startDemoRouter(
  o: DemoOptions,
  workers: readonly SimWorker[],
  print: (line: string) => void,
  stateUrl?: string,
): Promise<RunningRouter> {
  const port = o.port ?? DEFAULT_PORT;
  const host = o.host ?? "127.0.0.1";
  // Replicas decide as one router: each says where its peers reach it, so its port is known first.
  const shared = async (listenPort: number) => {
    if (stateUrl === undefined) return {};
    const state = { stateUrl, stateSecret: DEMO_STATE_SECRET, stateKeyPrefix: "radixgate-demo" };
    // nginx carries the bytes itself and asks this process for decisions only: no relaying.
    if ((o.dataPlane ?? "node") !== "node") return state;
    const known = listenPort === 0 ? await freePort() : listenPort;
    const reach = host === "0.0.0.0" || host === "::" || host.includes(":") ? "127.0.0.1" : host;
    return { ...state, port: known, stateAdvertiseUrl: `http://${reach}:${known}` };
  };
  const config: Config = configWith({
    host,
    port,
    policy: o.policy ?? defaultConfig().policies.policy,
    logLevel: o.logLevel ?? "warn",
    workerUrls: workers.map((w) => w.url),
    shutdownGraceSecs: 2,
    dataPlane: o.dataPlane ?? "node",
    ...(await shared(port)),
  });
  const logger = createLogger({ level: config.server.logLevel });
  try {
    return await startRouter(config, { logger });
  } catch (err) {
    if (!(err instanceof ListenError) || port === 0) throw err;
    print(`radixgate demo: ${err.message}; using a free port instead (choose one with --port).`);
    return startRouter(configWith({ port: 0, ...(await shared(0)) }, config), { logger });
  }
}

function printBanner(
  print: (line: string) => void,
  routers: readonly RunningRouter[],
  /** [the router's worker id, URL] */
  workers: readonly (readonly [string, string])[],
  o: DemoOptions,
  redis: LocalRedis | undefined,
): void {
  const url = (routers[0] as RunningRouter).url;
  const body = (stream: boolean) =>
    JSON.stringify({
      model: MODEL,
      messages: [
        { role: "system", content: "You are a concise assistant for the radixgate demo." },
        { role: "user", content: "What does a cache-aware router do?" },
      ],
      max_tokens: 32,
      ...(stream ? { stream: true } : {}),
    });
  print(
    [
      `radixgate demo: ${workers.length} simulated SGLang workers, policy ${o.policy ?? defaultConfig().policies.policy}, ` +
        `time scale ${o.timeScale ?? 1}${(o.trafficRate ?? 0) > 0 ? `, background traffic ${o.trafficRate} req/s` : ""}`,
      ...routers.map(
        (r, i) =>
          `  router   ${r.url}${routers.length > 1 && (o.dataPlane ?? "node") === "node" ? (i === 0 ? "  (decides for every replica)" : "  (asks the first where each request goes)") : ""}`,
      ),
      ...(redis !== undefined
        ? [`  redis    ${redis.url}  (the replicas share decisions, load and workers through it)`]
        : []),
      ...workers.map(([id, url]) => `  worker   ${id}  ${url}`),
      "",
      "Try:",
      `  curl -s ${url}/v1/chat/completions -H 'content-type: application/json' \\`,
      `    -d '${body(false)}'`,
      "  streaming:",
      `  curl -N ${url}/v1/chat/completions -H 'content-type: application/json' \\`,
      `    -d '${body(true)}'`,
      `  curl -s ${url}/workers          # the router's view of the fleet (admin API, loopback only)`,
      `  curl -s ${url}/metrics | grep radixgate_routing_decisions_total`,
      "",
      "Send the same system prompt again: the router sends it to the worker that already cached it.",
      ...(routers.length > 1
        ? [
            `Send it to another replica (${(routers[1] as RunningRouter).url}): it knows where the first one sent it.`,
          ]
        : []),
      "Ctrl-C to stop.",
      "",
    ].join("\n"),
  );
}

function statusLine(now: DemoStatus, before: DemoStatus): string {
  const prompt = now.promptTokens - before.promptTokens;
  const cached = now.cachedTokens - before.cachedTokens;
  const recent = prompt === 0 ? "-" : `${((cached / prompt) * 100).toFixed(1)}%`;
  const perWorker = Object.entries(now.requests)
    .map(([id, n]) => `${id} ${n}`)
    .join("  ");
  const time = new Date().toTimeString().slice(0, 8);
  return (
    `[${time}] fleet hit rate ${(now.hitRate * 100).toFixed(1)}% ` +
    `(${now.cachedTokens}/${now.promptTokens} prompt tokens cached; since last line ${recent}) | ` +
    `requests ${perWorker} | in flight ${now.inFlight}`
  );
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: String(DEFAULT_PORT) },
      host: { type: "string", default: "127.0.0.1" },
      workers: { type: "string" },
      "worker-ports": { type: "string" },
      "time-scale": { type: "string", default: "1" },
      policy: { type: "string", default: defaultConfig().policies.policy },
      traffic: { type: "boolean", default: false },
      rate: { type: "string", default: "4" },
      interval: { type: "string", default: "5" },
      "log-level": { type: "string", default: "warn" },
      replicas: { type: "string", default: "1" },
      "data-plane": { type: "string", default: "node" },
      help: { type: "boolean", default: false },
    },
  });
  if (values.help) {
    console.log(
      [
        "usage: npm run demo -- [options]",
        "  --port <n>          router port (default 30000; a free port if taken)",
        "  --host <addr>       router address (default 127.0.0.1)",
        "  --workers <n>       simulated workers (default 4, or one per --worker-ports)",
        "  --worker-ports <p,...>  the workers' ports (default: free ports, printed at start)",
        "  --time-scale <x>    real ms per model ms (default 1 = real time)",
        `  --policy <name>     ${POLICY_NAMES.join(" | ")} (default ${defaultConfig().policies.policy})`,
        "  --traffic           send a small background workload",
        "  --rate <req/s>      background traffic rate (default 4)",
        "  --interval <secs>   seconds between status lines (default 5)",
        `  --log-level <lvl>   router log level: ${LOG_LEVELS.join(" | ")} (default warn)`,
        "  --replicas <n>      router replicas sharing state through a local redis-server (default 1)",
        "  --data-plane <p>    node | nginx: nginx relays, the router decides (needs nginx and its",
        "                      njs module: apt-get install nginx-light libnginx-mod-http-js)",
      ].join("\n"),
    );
    return;
  }
  const number = (flag: string, raw: string, min: number): number => {
    const v = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(v) || v < min) {
      console.error(`demo: --${flag} must be a number >= ${min}, got "${raw}"`);
      process.exit(2);
    }
    return v;
  };
  if (!(POLICY_NAMES as readonly string[]).includes(values.policy)) {
    console.error(`demo: --policy must be one of ${POLICY_NAMES.join(", ")}`);
    process.exit(2);
  }
  if (!(LOG_LEVELS as readonly string[]).includes(values["log-level"])) {
    console.error(`demo: --log-level must be one of ${LOG_LEVELS.join(", ")}`);
    process.exit(2);
  }
  const dataPlane = values["data-plane"];
  if (dataPlane !== "node" && dataPlane !== "nginx") {
    console.error("demo: --data-plane must be node or nginx");
    process.exit(2);
  }
  const workerPorts = values["worker-ports"]
    ?.split(/[\s,]+/)
    .filter((p) => p !== "")
    .map((p) => Math.floor(number("worker-ports", p, 1)));
  let demo: Demo;
  try {
    demo = await startDemo({
      port: number("port", values.port, 0),
      host: values.host,
      ...(values.workers !== undefined ? { workers: number("workers", values.workers, 1) } : {}),
      ...(workerPorts !== undefined ? { workerPorts } : {}),
      timeScale: number("time-scale", values["time-scale"], 0),
      policy: values.policy as PolicyName,
      trafficRate: values.traffic ? number("rate", values.rate, 0.01) : 0,
      statsIntervalSecs: number("interval", values.interval, 0.1),
      logLevel: values["log-level"] as LogLevel,
      replicas: Math.floor(number("replicas", values.replicas, 1)),
      dataPlane,
    });
  } catch (err) {
    console.error(`demo: could not start: ${(err as Error).message}`);
    process.exit(1);
  }
  // One Ctrl-C reaches this process twice: from the terminal (the whole process group gets it)
  // and relayed by tsx. Only a second press, later, forces the exit.
  let firstSignalAt: number | undefined;
  const onSignal = () => {
    if (firstSignalAt !== undefined) {
      if (Date.now() - firstSignalAt > 1000) process.exit(130);
      return;
    }
    firstSignalAt = Date.now();
    console.log("\nstopping: letting in-flight requests finish...");
    demo.stop().then(
      () => {
        console.log("stopped.");
        process.exit(0);
      },
      (err: unknown) => {
        console.error(`error while stopping: ${(err as Error).message}`);
        process.exit(1);
      },
    );
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  void main();
}
