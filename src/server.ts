import type { RequestListener, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener, type HttpBindings } from "@hono/node-server";
import { Hono } from "hono";
import { addCommandLineWorkers } from "./command-line-workers.js";
import { type Config, requireStateSecret } from "./config.js";
import { WorkerMembership } from "./discovery/membership.js";
import { type Discovery, startDiscovery } from "./discovery/setup.js";
import type { DnsResolver } from "./discovery/worker-dns.js";
import { ConfigError, RouterError } from "./errors.js";
import { forwardSettings } from "./forward-settings.js";
import { BlockHashIndex } from "./index/block-hash-index.js";
import { createBaseIndex } from "./index/factory.js";
import { followMembership } from "./index/membership.js";
import type { PrefixIndex } from "./index/prefix-index.js";
import { BodyBudget } from "./intake/body-budget.js";
import { Intake } from "./intake/intake.js";
import { ParsePool } from "./intake/parse-pool.js";
import { intakeOptions } from "./intake-settings.js";
import { setUpKvEvents } from "./kv-events/setup.js";
import { listen } from "./listen.js";
import { accessLogger, createLogger, type Logger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { RoutingDecider } from "./policies/decider.js";
import { SessionTable } from "./policies/session-table.js";
import { Admission } from "./proxy/admission.js";
import { Forwarder, type ForwardHooks } from "./proxy/forward.js";
import { UsageFeedback } from "./proxy/usage-feedback.js";
import { routerPolicy } from "./router-policy.js";
import { registerAdminRoutes } from "./routes/admin.js";
import type { RouterContext } from "./routes/context.js";
import { registerInferenceRoutes } from "./routes/inference.js";
import { registerMetricsRoute, registerOpsRoutes } from "./routes/ops.js";
import { registerRouteExplainRoutes } from "./routes/route-explain.js";
import { routerListener } from "./routes/router-listener.js";
import { createPolicy } from "./scheduling/policy-factory.js";
import { SharedState } from "./state/shared-state.js";
import { type EvictionTimer, startEvictionTimer } from "./tree/eviction-timer.js";
import { HealthChecker } from "./workers/health.js";
import type { HostResolver } from "./workers/host-lookup.js";
import { EngineIntrospector } from "./workers/introspection.js";
import { WorkerRegistry } from "./workers/registry.js";
import { TreeBudgets } from "./workers/tree-budget.js";

export { ListenError } from "./listen.js";

type Env = { Bindings: HttpBindings };

export interface RunningRouter {
  readonly url: string;
  readonly port: number;
  readonly metricsPort: number | undefined;
  readonly context: RouterContext;
  /** Graceful stop: refuse new requests, let in-flight ones finish within the grace period, stop timers. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** For tests: the resolver --worker-dns asks (default: the system's DNS servers). */
  dnsResolver?: DnsResolver;
  /** How worker host names are resolved at registration (tests; default: the system resolver). */
  resolveHost?: HostResolver;
}

/** Builds the router (registry, policy, proxy, routes) without listening. */
export function createRouter(
  config: Config,
  options: StartOptions = {},
): { app: Hono<Env>; listener: RequestListener; context: RouterContext } {
  const logger = options.logger ?? createLogger({ level: config.logLevel });
  let metrics: Metrics | undefined;
  const policy = routerPolicy(config);
  // llmd_approx and aibrix_prefix are defined over block hashes: they bring their own index.
  const trees = createBaseIndex(policy.prefixIndex?.name ?? config.prefixIndex, {
    maxTreeSize: config.maxTreeSize === "auto" ? undefined : config.maxTreeSize,
    ...blockCharsOption(policy.prefixIndex?.blockChars ?? config.blockHashChars),
    capacityBlocks: config.blockHashCapacity,
    onEvict: (chars) => metrics?.evictedChars.inc(chars),
  });
  // --kv-events: the precise index from the engines' events, with the trees as fallback.
  const kvSetup = config.kvEvents ? setUpKvEvents(config, trees) : undefined;
  const baseIndex: PrefixIndex = kvSetup?.index ?? trees;
  // --state-url: the outermost layer publishes decisions to, and applies them from, the peers.
  const sharedState =
    config.stateUrl === undefined
      ? undefined
      : new SharedState(
          {
            url: config.stateUrl,
            secret: requireStateSecret(config),
            keyPrefix: config.stateKeyPrefix,
            maxTextChars: config.stateMaxTextChars,
            streamLength: config.stateStreamLength,
            loadIntervalMs: config.stateLoadIntervalMs,
            queueSize: config.stateQueueSize,
            claimTimeoutMs: config.stateClaimTimeoutMs,
            claimTtlMs: config.stateClaimTtlMs,
          },
          logger,
        );
  const index = sharedState?.wrapIndex(baseIndex) ?? baseIndex;
  const registry = new WorkerRegistry(
    {
      breaker: {
        failureThreshold: config.cbFailureThreshold,
        openMs: config.cbTimeoutSecs * 1000,
        successThreshold: config.cbSuccessThreshold,
      },
      connectTimeoutMs: config.connectTimeoutSecs * 1000,
      refuseLinkLocal: !config.allowLinkLocalWorkers,
    },
    {
      allowLinkLocal: config.allowLinkLocalWorkers,
      ...(config.workerApiKey !== undefined ? { defaultApiKey: config.workerApiKey } : {}),
      ...(options.resolveHost !== undefined ? { resolveHost: options.resolveHost } : {}),
    },
  );
  followMembership(index, registry);
  metrics = new Metrics(registry);
  const m = metrics;
  const kvEvents = kvSetup?.attach(registry, m.registry, logger);
  // Tree budgets follow the engines' KV capacity (--max-tree-size auto) or stay fixed.
  const budgets = new TreeBudgets(index, config.maxTreeSize, config.treeCapacityFactor);
  registry.onChange((event, worker) => {
    if (event === "added") budgets.added(worker);
  });
  const introspection = new EngineIntrospector(
    registry,
    {
      intervalMs: config.enginePollIntervalSecs * 1000,
      timeoutMs: config.enginePollTimeoutSecs * 1000,
    },
    logger,
    (worker) => {
      budgets.update(worker);
      // --block-hash-chars auto: blocks as large as the engine's (GIE's autoTune).
      // A profile that fixes its block size (aibrix_prefix: 128 characters) keeps it.
      if (
        config.blockHashChars === "auto" &&
        policy.prefixIndex === undefined &&
        trees instanceof BlockHashIndex &&
        trees.learnBlockTokens(worker.signals.blockSizeTokens)
      ) {
        logger.info(
          { worker: worker.id, block_chars: trees.blockChars },
          "block-hash index: block size learned from the engine; blocks held so far forgotten",
        );
      }
      kvEvents?.learnRanks(worker);
    },
  );

  const settings = forwardSettings(config);
  const upstreamHooks = {
    onRetry: (endpoint) => m.retries.inc({ endpoint }),
    onUpstreamError: (worker, kind) => m.upstreamErrors.inc({ worker: worker.id, kind }),
  } satisfies Partial<ForwardHooks>;
  const hooks: ForwardHooks = {
    ...upstreamHooks,
    onDecision: (policy, branch, matchRate) => {
      m.decisions.inc({ policy, branch });
      if (matchRate !== null) m.matchRate.observe(matchRate);
    },
  };
  const feedback = new UsageFeedback({
    onEngineTokens: (worker, prompt, cached) => {
      m.enginePromptTokens.inc({ worker: worker.id }, prompt);
      m.engineCachedTokens.inc({ worker: worker.id }, cached);
    },
    onCorrection: (worker) => m.feedbackCorrections.inc({ worker: worker.id }),
  });
  const decider = new RoutingDecider(
    policy,
    index,
    config.sessionAffinity === "off" ? undefined : new SessionTable(config.maxSessions),
    sharedState?.claims,
  );
  const forwarder = new Forwarder(registry, decider, settings, hooks, feedback);
  // /get_model_info and /get_server_info need any available worker, not a cache decision.
  const modelsForwarder = new Forwarder(
    registry,
    new RoutingDecider(createPolicy("round_robin", {}), index),
    settings,
    { ...upstreamHooks, onDecision: () => {} },
  );

  const health = new HealthChecker(
    registry,
    {
      intervalMs: config.healthCheckIntervalSecs * 1000,
      timeoutMs: config.healthCheckTimeoutSecs * 1000,
      failureThreshold: config.healthFailureThreshold,
      successThreshold: config.healthSuccessThreshold,
      endpoint: config.healthCheckEndpoint,
    },
    logger,
  );
  const membership = new WorkerMembership({
    registry,
    health,
    logger,
    ...(kvEvents !== undefined ? { kvEvents } : {}),
    kvRules: {
      allowIpc: config.kvEventsAllowIpc,
      allowLinkLocal: config.allowLinkLocalWorkers,
      connectTimeoutMs: config.connectTimeoutSecs * 1000,
    },
  });
  const parsePool =
    config.parseWorkers > 0
      ? new ParsePool({ size: config.parseWorkers, memoryMb: config.parseWorkerMemoryMb })
      : undefined;
  const context: RouterContext = {
    config,
    logger,
    accessLog: accessLogger(logger),
    metrics: m,
    registry,
    membership,
    index,
    decider,
    forwarder,
    modelsForwarder,
    admission: new Admission(
      config.maxConcurrentRequests,
      config.queueSize,
      config.queueTimeoutSecs * 1000,
    ),
    health,
    bodyBudget: new BodyBudget(config.maxBodyBufferBytes),
    intake: new Intake(intakeOptions(config, kvEvents !== undefined), registry, parsePool),
    parsePool,
    introspection,
    state: { shuttingDown: false, active: 0 },
    ...(kvEvents !== undefined ? { kvEvents } : {}),
    ...(sharedState !== undefined ? { sharedState } : {}),
  };

  // A worker a peer replica added takes traffic here only once this replica's own probe passes.
  sharedState?.attach(registry, m.registry, {
    onRemoteAdd: (worker) => void context.health.probeFirst(worker, { fromPeer: true }),
  });

  const app = new Hono<Env>();
  registerOpsRoutes(app, context);
  registerAdminRoutes(app, context);
  registerRouteExplainRoutes(app, context);
  registerInferenceRoutes(app, context);
  installErrorHandlers(app, logger);
  return { app, listener: routerListener(context, app), context };
}

function installErrorHandlers(app: Hono<Env>, logger: Logger): void {
  app.notFound((c) => {
    const error = new RouterError("not_found", `No route for ${c.req.method} ${c.req.path}.`);
    return c.json(error.toBody(), 404);
  });
  app.onError((err, c) => {
    if (err instanceof RouterError) return c.json(err.toBody(), err.status as 400);
    logger.error({ err, path: c.req.path }, "unhandled error");
    return c.json(new RouterError("internal_error").toBody(), 500);
  });
}

/** Starts the router: listens, registers --worker-urls, starts health checks and eviction. */
export async function startRouter(
  config: Config,
  options: StartOptions = {},
): Promise<RunningRouter> {
  const { listener, context } = createRouter(config, options);
  const { logger, registry, health, introspection } = context;
  // A fixed --port is known before listening; port 0 is only known after (no worker can be it yet).
  if (config.port !== 0) registry.setListenAddress({ host: config.host, port: config.port });
  try {
    await addCommandLineWorkers(registry, config);
  } catch (err) {
    context.kvEvents?.close();
    await registry.close();
    if (err instanceof RouterError) throw new ConfigError("--worker-urls", err.message);
    throw err;
  }

  // Each worker answers one health check before it takes traffic, so a worker that is down at
  // start is reported as such from the first request on (bounded by the health check timeout).
  await Promise.all(registry.list().map((w) => health.probeFirst(w)));
  // Peers' workers and recent decisions before the first request (bounded wait; never fails).
  await context.sharedState?.start();
  let server: Server;
  try {
    server = await listen(listener, config.host, config.port, "--port");
  } catch (err) {
    await context.sharedState?.stop();
    await registry.close();
    throw err;
  }
  registry.setListenAddress({ host: config.host, port: (server.address() as AddressInfo).port });
  let metricsServer: Server | undefined;
  if (config.prometheusPort !== undefined) {
    const metricsApp = new Hono<Env>();
    registerMetricsRoute(metricsApp, context.metrics);
    try {
      metricsServer = await listen(
        getRequestListener(metricsApp.fetch),
        config.host,
        config.prometheusPort,
        "--prometheus-port",
      );
    } catch (err) {
      server.close();
      context.kvEvents?.close();
      await context.sharedState?.stop();
      await registry.close();
      throw err;
    }
  }

  // --worker-file, --worker-dns: once the router's own address is known (a source listing it is
  // refused), their first answers registered and health-checked before "listening" is logged.
  let discovery: Discovery;
  try {
    discovery = await startDiscovery(
      {
        workerFile: config.workerFile,
        workerDns: config.workerDns,
        dnsIntervalMs: config.dnsIntervalSecs * 1000,
        dnsTimeoutMs: config.dnsTimeoutSecs * 1000,
        graceMs: config.discoveryGraceSecs * 1000,
        ...(options.dnsResolver !== undefined ? { dnsResolver: options.dnsResolver } : {}),
      },
      context.membership,
      logger,
    );
  } catch (err) {
    server.close();
    metricsServer?.close();
    context.kvEvents?.close();
    await context.sharedState?.stop();
    await registry.close();
    throw err;
  }
  health.start();
  introspection.start();
  const eviction: EvictionTimer = startEvictionTimer(
    () => context.index.evictionUnits(),
    config.evictionIntervalSecs,
    (err) => logger.error({ err }, "eviction pass failed"),
  );

  const port = (server.address() as AddressInfo).port;
  const displayHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  const url = `http://${displayHost.includes(":") ? `[${displayHost}]` : displayHost}:${port}`;
  const metricsPort = metricsServer ? (metricsServer.address() as AddressInfo).port : undefined;
  logger.info(
    {
      url,
      host: config.host,
      port,
      policy: context.decider.policy.name,
      workers: registry.list().map((w) => w.url),
      metrics_port: metricsPort,
    },
    "radixgate listening",
  );

  let stopping: Promise<void> | undefined;
  const stop = (graceMs = config.shutdownGraceSecs * 1000): Promise<void> => {
    stopping ??= (async () => {
      context.state.shuttingDown = true;
      discovery.stop();
      server.close();
      metricsServer?.close();
      server.closeIdleConnections();
      // Logged once the port is closed: whoever reads the line (an orchestrator, a test) and then
      // connects is refused, not accepted into the closing backlog and reset. Log lines are
      // written synchronously (logger.ts), so the order is the order they are seen in.
      logger.info({ in_flight: context.state.active, grace_ms: graceMs }, "shutting down");
      const deadline = Date.now() + graceMs;
      while (context.state.active > 0 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      if (context.state.active > 0) {
        logger.warn({ in_flight: context.state.active }, "grace period over; closing connections");
        // End what is left cleanly (a stream gets an SSE error event, a waiting request a 503)
        // and give those last bytes a moment to leave before the sockets are closed.
        context.forwarder.abortAll();
        context.modelsForwarder.abortAll();
        const flushBy = Date.now() + SHUTDOWN_FLUSH_MS;
        while (context.state.active > 0 && Date.now() < flushBy) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      }
      server.closeAllConnections();
      metricsServer?.closeAllConnections();
      health.stop();
      introspection.stop();
      eviction.stop();
      context.kvEvents?.close();
      await context.parsePool?.close();
      await context.sharedState?.stop();
      await registry.close();
      logger.info("stopped");
    })();
    return stopping;
  };

  return { url, port, metricsPort, context, stop };
}

/** After the grace period, how long aborted requests get to write their last event. */
const SHUTDOWN_FLUSH_MS = 500;

/** --block-hash-chars: a number fixes the block size, auto leaves the index's default (learned). */
function blockCharsOption(chars: number | "auto"): { blockChars?: number } {
  return chars === "auto" ? {} : { blockChars: chars };
}
