import type { RequestListener, Server } from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { FleetCapacity } from "./admission/fleet-capacity.js";
import { buildAdmission } from "./assembly/admission.js";
import { buildDataPlane } from "./assembly/data-plane.js";
import { buildIndexStack, indexStackOptions } from "./assembly/index-stack.js";
import { Lifecycle } from "./assembly/lifecycle.js";
import { NginxPlane } from "./assembly/nginx-plane.js";
import { buildRoutes, type Env, routeOptions } from "./assembly/routes.js";
import { cacheAccountOptions } from "./cache-account/settings.js";
import { addCommandLineWorkers } from "./command-line-workers.js";
import type { Config } from "./config.js";
import { decodePolicyName, pdEnabled, prefillPolicyName } from "./disaggregation/settings.js";
import { kubernetesDiscoveryOptions } from "./discovery/kubernetes-settings.js";
import { WorkerMembership } from "./discovery/membership.js";
import { type Discovery, startDiscovery } from "./discovery/setup.js";
import type { DnsResolver } from "./discovery/worker-dns.js";
import { ConfigError, RouterError } from "./errors.js";
import { forgetHeld } from "./index/forget-held.js";
import { BodyBudget } from "./intake/body-budget.js";
import { Intake } from "./intake/intake.js";
import { ParsePool } from "./intake/parse-pool.js";
import { bodyShareOfClient, intakeOptions } from "./intake/settings.js";
import { listen } from "./listen.js";
import { accessLogger, createLogger, type Logger } from "./logger.js";
import { Metrics } from "./metrics.js";
import { viaToken } from "./proxy/headers.js";
import { LeaderRelay } from "./proxy/leader-relay.js";
import { PeerOrOwnAttempts, RemoteRelays } from "./proxy/remote-relay.js";
import { NodeAttempts } from "./proxy/send-attempt.js";
import { forwardSettings } from "./proxy/settings.js";
import { namedPolicy, routerPolicy } from "./router-policy.js";
import type { RouterContext } from "./routes/context.js";
import { decisionListener } from "./routes/decision.js";
import { registerMetricsRoute } from "./routes/ops.js";
import { fileDecisionTrace } from "./scheduling/decision-trace.js";
import type { SiblingLink } from "./state/cluster-channel.js";
import { relayMode, requireStateSecret } from "./state/settings.js";
import { StateFile } from "./state/state-file.js";
import { StateSecret } from "./state/state-secret.js";
import { tracingOptions } from "./tracing/settings.js";
import { startTracing } from "./tracing/start-tracing.js";
import { type EvictionTimer, startEvictionTimer } from "./tree/eviction-timer.js";
import { HealthChecker } from "./workers/health.js";
import type { HostResolver } from "./workers/host-lookup.js";
import { EngineIntrospector } from "./workers/introspection.js";
import { LoraLoader } from "./workers/lora-loader.js";
import { WorkerRegistry } from "./workers/registry.js";
import { ResponseHolders } from "./workers/response-holders.js";
import { noteEngineReading } from "./workers/saturation.js";
import { loraPathMap } from "./workers/settings.js";

export { ListenError } from "./listen.js";

export interface RunningRouter {
  readonly url: string;
  readonly port: number;
  readonly metricsPort: number | undefined;
  readonly context: RouterContext;
  /** --data-plane nginx: the nginx radixgate supervises (its pid, how often it started). */
  readonly nginx?: NginxPlane;
  /** Graceful stop: refuse new requests, let in-flight ones finish within the grace period, stop timers. */
  stop(graceMs?: number): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  /** For tests: the resolver --worker-dns asks (default: the system's DNS servers). */
  dnsResolver?: DnsResolver;
  /** How worker host names are resolved at registration (tests; default: the system resolver). */
  resolveHost?: HostResolver;
  /** A radixgate-cluster process: its local channel to its siblings (state/cluster-channel.ts). */
  siblings?: SiblingLink;
  /** Tests: called with each service's name before it starts; a throw fails that step. */
  beforeServiceStart?: (service: string) => void;
}

/**
 * Builds the router without listening, in one pass: the registry (it knows nothing of the index),
 * the health checker, the index stack that follows the registry (assembly/index-stack.ts), the
 * engine reads, the data plane (assembly/data-plane.ts), and the routes (assembly/routes.ts).
 */
export function createRouter(
  config: Config,
  options: StartOptions = {},
): { app: Hono<Env>; listener: RequestListener; context: RouterContext; nginx?: NginxPlane } {
  const { workers, disaggregation, policies } = config;
  const logger =
    options.logger ?? createLogger({ level: config.server.logLevel, json: config.server.jsonLog });
  const pd = pdEnabled(disaggregation);
  const pairProtocol = disaggregation.vllmPdDisaggregation ? "vllm" : "sglang";
  // With disaggregation the router's policy is the prefill side's (disaggregation/settings.ts).
  const prefillPolicy = pd ? prefillPolicyName(disaggregation) : undefined;
  const policy =
    prefillPolicy === undefined
      ? routerPolicy(policies, config.scheduling)
      : namedPolicy(policies, prefillPolicy);
  const registry = new WorkerRegistry(
    {
      breaker: config.breaker,
      connectTimeoutMs: workers.connectTimeoutMs,
      maxConnections: workers.workerMaxConnections,
      refuseLinkLocal: !workers.allowLinkLocalWorkers,
      maxRunning: workers.workerMaxRunning,
    },
    {
      allowLinkLocal: workers.allowLinkLocalWorkers,
      ...(workers.workerApiKey !== undefined ? { defaultApiKey: workers.workerApiKey } : {}),
      ...(options.resolveHost !== undefined ? { resolveHost: options.resolveHost } : {}),
    },
  );
  const metrics = new Metrics(registry);
  const health = new HealthChecker(registry, config.health, logger);
  // The fleet saturation signal: the index and the cache account feed it (GET /debug/capacity).
  let capacity: FleetCapacity | undefined;
  const stack = buildIndexStack(indexStackOptions(config, policy), {
    registry,
    metrics,
    logger,
    onEvict: (chars) => capacity?.noteEvicted(chars),
    // A worker a peer replica added takes traffic here only once this replica's own probe passes.
    onRemoteAdd: (worker) => void health.probeFirst(worker, { fromPeer: true }),
    siblings: options.siblings,
  });
  const { index, kvEvents, replication, sharedState, siblingState } = stack;
  capacity = new FleetCapacity(registry, index, config.fleet);
  capacity.register(metrics.registry);

  const stateFile =
    config.state.file === undefined
      ? undefined
      : new StateFile(
          {
            path: config.state.file,
            secret: config.state.secret,
            keyPrefix: config.state.keyPrefix,
            maxBytes: config.state.snapshotMaxBytes,
            maxAgeMs: config.state.maxOpAgeMs,
            saveTimeoutMs: STATE_FILE_SAVE_TIMEOUT_MS,
          },
          stack.local,
          registry,
          logger,
        );
  const introspection = new EngineIntrospector(registry, config.engines, logger, (worker) => {
    stack.engineRead(worker);
    // A reading that shows a queue tells admission the engine's full batch (saturation.ts).
    noteEngineReading(worker);
  });
  const { intake, proxy, routes } = config;
  // A worker dead past --dead-worker-grace-secs: its entries go here and, through the publishing
  // layers, on the peers (so the snapshot leaves it out); its cache account rows go too.
  // A worker's engine is read once its health checks let it take traffic (introspection.ts).
  health.onReady = (worker) => introspection.readNow(worker);
  health.onDead = (worker) => {
    forgetHeld(index, worker.id);
    cacheLedger.window.forgetWorker(worker.id);
  };
  const fleet = capacity;
  // Responses API: which worker holds each response, read by intake, written where an answer
  // goes by (the forwarder's chunks, or a relay's completion record).
  const responseHolders = new ResponseHolders(routes.maxResponseIds, routes.responseIdTtlMs);
  // --data-plane nginx: nginx relays, this process decides (assembly/nginx-plane.ts).
  const nginx =
    config.dataPlane.dataPlane === "nginx"
      ? new NginxPlane(
          {
            binary: config.dataPlane.nginxBinary,
            host: config.server.host,
            port: config.server.port,
            connectTimeoutMs: workers.connectTimeoutMs,
            idleTimeoutMs: proxy.idleTimeoutMs,
            maxBodyBytes: intake.maxPayloadSize,
            waitHeader: config.admission.queueWaitHeader,
            explainHeader: config.cacheAccount.explainHeader,
            onResponseId: (id, worker) => responseHolders.record(id, worker.id),
          },
          logger,
        )
      : undefined;
  const forward = forwardSettings(proxy, {
    apiKey: routes.apiKey,
    modelRouting: workers.modelRouting,
  });
  // --state-advertise-url: every request decided by the leader (--state-relay decisions, the
  // default, or all; new-prefixes: only new prefixes), which decides them alone. Not in a
  // radixgate-cluster, whose processes share one port (a relay could land on any of them).
  const relaying =
    replication !== undefined &&
    sharedState !== undefined &&
    options.siblings === undefined &&
    config.state.claimTimeoutMs > 0;
  // --state-relay decisions: as leader, the attempts of a request a replica relays for it are
  // that replica's to carry (proxy/leader-decisions.ts); the secret signs the replicas' calls.
  const peerCalls =
    relaying && relayMode(config.state) === "decisions"
      ? {
          relays: new RemoteRelays({
            upstreamOrigin: (worker) => new URL(worker.url).origin,
            readsUsage: false,
            waitHeader: config.admission.queueWaitHeader,
            sendsWorkerAuth: false,
            firstByte: "reported",
            // The replica carried the answer: the leader learns which worker holds a response.
            onResponseId: (id, worker) => responseHolders.record(id, worker.id),
          }),
          secret: new StateSecret(requireStateSecret(config.state)),
        }
      : undefined;
  const { decider, forwarder, cacheLedger } = buildDataPlane(
    {
      forward,
      maxSessions: intake.sessionAffinity === "off" ? undefined : intake.maxSessions,
      cacheAccount: cacheAccountOptions(config.cacheAccount),
      ...(pd
        ? {
            pd: {
              protocol: pairProtocol,
              decodePolicy: namedPolicy(
                policies,
                decodePolicyName({ ...disaggregation, policy: policies.policy }),
              ),
            },
          }
        : {}),
    },
    {
      policy,
      index,
      registry,
      metrics,
      claims: replication?.claims,
      ...(replication === undefined
        ? {}
        : { replicaRank: () => replication.rank(), rankHoldMs: config.state.rankHoldMs }),
      logger,
      sender:
        peerCalls === undefined
          ? nginx?.relays
          : new PeerOrOwnAttempts(peerCalls.relays, new NodeAttempts(forward.maxCoolDownMs)),
    },
  );
  const leaderRelay =
    !relaying || replication === undefined || sharedState === undefined
      ? undefined
      : new LeaderRelay({
          leaderUrl: () => replication.relayTarget(),
          mode: relayMode(config.state),
          wouldClaim: (routing) => decider.wouldClaim(routing, pd ? "prefill" : undefined),
          timeoutMs: config.state.relayTimeoutMs,
          idleTimeoutMs: proxy.idleTimeoutMs,
          requestTimeoutMs: proxy.requestTimeoutMs,
          connectTimeoutMs: workers.connectTimeoutMs,
          via: viaToken(forward.instanceId),
          onOutcome: (outcome) => sharedState.countRelay(outcome),
          decisions:
            peerCalls === undefined
              ? undefined
              : {
                  secret: peerCalls.secret,
                  worker: (id) => registry.get(id),
                  forwardAuthorization: forward.forwardAuthorization,
                  firstByteTimeoutMs: forward.firstByteTimeoutMs,
                  streamFirstByteTimeoutMs: forward.streamFirstByteTimeoutMs,
                  idleTimeoutMs: proxy.idleTimeoutMs,
                  waitHeader: config.admission.queueWaitHeader,
                  explainHeader: config.cacheAccount.explainHeader,
                },
        });
  if (leaderRelay !== undefined) decider.decidesAlone = () => replication?.decidesAlone() === true;
  const membership = new WorkerMembership({
    registry,
    health,
    logger,
    ...(kvEvents !== undefined ? { kvEvents } : {}),
    kvRules: {
      allowIpc: config.kvEvents.kvEventsAllowIpc,
      allowLinkLocal: workers.allowLinkLocalWorkers,
      connectTimeoutMs: workers.connectTimeoutMs,
    },
    workerTypes: pd ? ["prefill", "decode"] : ["regular"],
  });
  const parsePool =
    intake.parseWorkers > 0
      ? new ParsePool({ size: intake.parseWorkers, memoryMb: intake.parseWorkerMemoryMb })
      : undefined;
  const admission = buildAdmission(config.admission, {
    registry,
    metrics,
    logger,
    // --tenant-quota shares its counters through --state-url when it is set.
    state: config.state,
  });
  // Every buffered body, router-wide: intake leases from it, GET /debug and the tests read it.
  const bodyBudget = new BodyBudget(
    intake.maxBodyBufferBytes,
    bodyShareOfClient(intake.maxBodyBufferBytesPerClient, intake.maxPayloadSize),
  );
  const context: RouterContext = {
    config: routeOptions(config),
    logger,
    accessLog: accessLogger(logger),
    metrics,
    registry,
    membership,
    index,
    decider,
    forwarder,
    cacheLedger,
    admission: admission.admission,
    health,
    bodyBudget,
    intake: new Intake(
      {
        ...intakeOptions(intake, {
          withTokenizeInput: kvEvents !== undefined,
          modelRouting: workers.modelRouting,
        }),
        identity: admission.identity,
        // PD pairs rewrite the body (disaggregation/): intake's parse works out what they need.
        pairs: pd ? pairProtocol : undefined,
        responseHolders,
      },
      registry,
      parsePool,
      admission.tenants,
      bodyBudget,
    ),
    responseHolders,
    parsePool,
    introspection,
    state: { shuttingDown: false, active: 0 },
    ...(kvEvents !== undefined ? { kvEvents } : {}),
    ...(replication !== undefined ? { replication } : {}),
    ...(sharedState !== undefined ? { sharedState } : {}),
    ...(leaderRelay !== undefined ? { leaderRelay } : {}),
    ...(peerCalls !== undefined ? { peerCalls } : {}),
    ...(siblingState !== undefined ? { siblingState } : {}),
    ...(stateFile !== undefined ? { stateFile } : {}),
    ...(config.lora.loraLoadOnDemand
      ? {
          loraLoader: new LoraLoader(
            registry,
            { ...config.lora, paths: loraPathMap(config.lora) },
            logger,
          ),
        }
      : {}),
    capacity: fleet,
  };
  cacheLedger.onRecord = (account) =>
    fleet.noteUncached(
      account.model,
      account.promptTokens - (account.reportedTokens ?? account.chosenTokens),
    );
  const built = buildRoutes(context);
  if (nginx === undefined) return { ...built, context };
  return {
    app: built.app,
    listener: decisionListener(context, built.app, nginx.relays),
    context,
    nginx,
  };
}

/** Workers the "listening" line names. */
const LISTED_AT_START = 20;

/**
 * Starts the router: listens, registers --worker-urls, starts health checks and eviction. Every
 * service is declared once, in start order, with its stop (assembly/lifecycle.ts): a step that
 * fails stops the ones before it in reverse order, and so does `stop`.
 */
export async function startRouter(
  config: Config,
  options: StartOptions = {},
): Promise<RunningRouter> {
  const { listener, context, nginx } = createRouter(config, options);
  const { disaggregation } = config;
  const { host, port: listenPort, prometheusPort, shutdownGraceMs } = config.server;
  const { logger, registry, health, introspection } = context;
  const services = new Lifecycle(logger, options.beforeServiceStart);
  // --otlp-endpoint or OTEL_*: the SDK is imported only then (tracing/start-tracing.ts).
  let tracing: Awaited<ReturnType<typeof startTracing>>;
  await services.start({
    name: "tracing",
    start: async () => {
      tracing = await startTracing(tracingOptions(config.tracing, process.env), logger);
      if (tracing !== undefined) context.tracing = tracing;
    },
    // The last spans go out (bounded: a collector that is down does not hold the stop).
    stop: () => tracing?.shutdown(TRACING_FLUSH_MS),
  });
  // --decision-trace: opened before the first request, flushed after the last.
  const traceFile = config.scheduling.decisionTrace;
  if (traceFile !== "") {
    let file: ReturnType<typeof fileDecisionTrace> | undefined;
    await services.start({
      name: "decision-trace",
      start: () => {
        file = fileDecisionTrace(traceFile);
        context.decider.trace = file.trace;
      },
      stop: () => file?.close(),
    });
  }
  // Made running by createRouter: stopped last.
  await services.running({ name: "registry", stop: () => registry.close() });
  const { kvEvents, parsePool } = context;
  if (kvEvents !== undefined)
    await services.running({ name: "kv-events", stop: () => kvEvents.close() });
  if (parsePool !== undefined)
    await services.running({ name: "parse-pool", stop: () => parsePool.close() });
  // A fixed --port is known before listening; port 0 is only known after (no worker can be it yet).
  if (listenPort !== 0) registry.setListenAddress({ host, port: listenPort });
  await services.start({
    name: "command-line-workers",
    start: async () => {
      try {
        await addCommandLineWorkers(registry, {
          workerUrls: config.discovery.workerUrls,
          workerApiKey: config.workers.workerApiKey,
          apiKey: config.routes.apiKey,
          prefill: disaggregation.prefill,
          decode: disaggregation.decode,
        });
      } catch (err) {
        if (err instanceof RouterError) throw new ConfigError("--worker-urls", err.message);
        throw err;
      }
    },
    stop: () => {},
  });
  // Each worker answers one health check before it takes traffic, so a worker that is down at
  // start is reported as such from the first request on (bounded by the health check timeout).
  await services.start({
    name: "first-probes",
    start: () => Promise.all(registry.list().map((w) => health.probeFirst(w))),
    stop: () => {},
  });
  // Peers' workers and recent decisions before the first request (bounded wait; never fails).
  const { sharedState, siblingState, admission } = context;
  if (sharedState !== undefined)
    await services.start({
      name: "shared-state",
      start: () => sharedState.start(),
      stop: async () => {
        await sharedState.stop();
        await context.leaderRelay?.close();
      },
    });
  // --tenant-quota: its file watched, its Redis connection (bounded wait; never fails).
  await services.start({
    name: "admission",
    start: () => admission.start(),
    stop: () => admission.stop(),
  });
  // radixgate-cluster: the siblings' recent decisions and counts, from the primary (bounded wait).
  if (siblingState !== undefined)
    await services.start({
      name: "siblings",
      start: () => siblingState.start(),
      stop: () => siblingState.stop(),
    });
  let server: Server | undefined;
  await services.start({
    name: "http",
    start: async () => {
      // --data-plane nginx: this listener is the private one nginx asks; nginx has the port.
      if (nginx !== undefined) await nginx.listen(listener);
      else server = await listen(listener, host, listenPort, "--port");
    },
    stop: async () => {
      server?.close();
      server?.closeAllConnections();
      await nginx?.stop();
    },
  });
  const mainServer = server;
  const publicPort =
    nginx !== undefined ? nginx.port : ((mainServer as Server).address() as AddressInfo).port;
  registry.setListenAddress({ host, port: publicPort });
  let metricsServer: Server | undefined;
  if (prometheusPort !== undefined) {
    const metricsApp = new Hono<Env>();
    registerMetricsRoute(metricsApp, context.metrics);
    await services.start({
      name: "metrics-http",
      start: async () => {
        metricsServer = await listen(
          getRequestListener(metricsApp.fetch),
          host,
          prometheusPort,
          "--prometheus-port",
        );
      },
      stop: () => {
        metricsServer?.close();
        metricsServer?.closeAllConnections();
      },
    });
  }

  // --worker-file, --worker-dns: once the router's own address is known (a source listing it is
  // refused), their first answers registered and health-checked before "listening" is logged.
  let discovery: Discovery | undefined;
  const stopDiscovery = () => {
    discovery?.stop();
    discovery = undefined;
  };
  await services.start({
    name: "discovery",
    start: async () => {
      discovery = await startDiscovery(
        {
          ...config.discovery,
          ...(config.kubernetes.serviceDiscovery
            ? {
                kubernetes: kubernetesDiscoveryOptions({
                  ...config.kubernetes,
                  ...config.disaggregation,
                }),
              }
            : {}),
          ...(options.dnsResolver !== undefined ? { dnsResolver: options.dnsResolver } : {}),
        },
        context.membership,
        logger,
      );
    },
    stop: stopDiscovery,
  });
  // --state-file: the index as the last stop left it, for the workers registered by now (the
  // command line's and discovery's first answers); saved again when the router stops, after the
  // requests drained.
  const { stateFile } = context;
  if (stateFile !== undefined)
    await services.start({
      name: "state-file",
      start: () => stateFile.load(),
      stop: () => stateFile.save(),
    });
  await services.start({
    name: "health",
    start: () => health.start(),
    stop: () => {
      health.stop();
      context.membership.flushLogs();
    },
  });
  await services.start({
    name: "fleet-capacity",
    start: () => context.capacity.start(),
    stop: () => context.capacity.stop(),
  });
  await services.start({
    name: "introspection",
    start: () => introspection.start(),
    stop: () => introspection.stop(),
  });
  let eviction: EvictionTimer | undefined;
  if (nginx !== undefined)
    await services.start({
      name: "nginx",
      start: () => nginx.start(registry),
      stop: () => nginx.stop(),
    });
  await services.start({
    name: "eviction",
    start: () => {
      eviction = startEvictionTimer(
        () => context.index.evictionUnits(),
        config.index.evictionIntervalMs,
        (err) => logger.error({ err }, "eviction pass failed"),
      );
    },
    stop: () => eviction?.stop(),
  });

  // nginx may have chosen its port again (--port 0 taken meanwhile).
  const port = nginx !== undefined ? nginx.port : publicPort;
  const displayHost = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host;
  const url = `http://${displayHost.includes(":") ? `[${displayHost}]` : displayHost}:${port}`;
  const metricsPort = metricsServer ? (metricsServer.address() as AddressInfo).port : undefined;
  logger.info(
    {
      url,
      host,
      port,
      policy: context.decider.policy.name,
      // The first few: a worker file of 10k entries made this one line 250 KB.
      workers: registry
        .list()
        .slice(0, LISTED_AT_START)
        .map((w) => w.url),
      workers_total: registry.size,
      metrics_port: metricsPort,
    },
    "radixgate listening",
  );
  // Replicas without a leader to defer to decide apart, each with its own picture: say so once.
  if (
    context.sharedState !== undefined &&
    options.siblings === undefined &&
    config.state.advertiseUrl === undefined
  )
    logger.warn(
      "shared state without --state-advertise-url: replicas decide apart, with claims (1-3 points of hit rate under one router in docs/benchmarks.md); give every replica the URL its peers reach it at, so that one decides for all",
    );

  let stopping: Promise<void> | undefined;
  const stop = (graceMs = shutdownGraceMs): Promise<void> => {
    stopping ??= (async () => {
      context.state.shuttingDown = true;
      // Requests still waiting for admission have not started: 503 shutting_down at once, so their
      // clients retry on another replica instead of waiting out the grace period here.
      context.admission.queue.close();
      stopDiscovery();
      mainServer?.close();
      metricsServer?.close();
      mainServer?.closeIdleConnections();
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
        const flushBy = Date.now() + SHUTDOWN_FLUSH_MS;
        while (context.state.active > 0 && Date.now() < flushBy) {
          await new Promise((resolve) => setTimeout(resolve, 10));
        }
      }
      // Every service, in the reverse of its start order.
      await services.stop();
      logger.info("stopped");
    })();
    return stopping;
  };

  return { url, port, metricsPort, context, stop, ...(nginx !== undefined ? { nginx } : {}) };
}

/** How long a stop waits for the --state-file snapshot to be written. */
const STATE_FILE_SAVE_TIMEOUT_MS = 5000;
/** After the grace period, how long aborted requests get to write their last event. */
const SHUTDOWN_FLUSH_MS = 500;
/** How long a stop waits for the last spans to reach the collector. */
const TRACING_FLUSH_MS = 5000;
