import type { HttpBindings } from "@hono/node-server";
import type { Context, Hono, MiddlewareHandler } from "hono";
import { RouterError } from "../errors.js";
import { checkKvEndpoint } from "../kv-events/endpoint-rules.js";
import type { KvEndpoints } from "../kv-events/manager.js";
import { systemResolver } from "../workers/host-lookup.js";
import type { Worker } from "../workers/worker.js";
import { bearerMatches, isLoopback } from "./auth.js";
import { checkContentType } from "./content-type.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/** Paths of the admin API, REST and SGLang-compatible. */
const ADMIN_PATHS = ["/workers", "/workers/*", "/add_worker", "/remove_worker", "/list_workers"];

/**
 * The workers admin API. With --admin-api-key it needs `Authorization: Bearer <key>`; without
 * one it answers loopback clients only, the safe default for a router bound to 0.0.0.0.
 */
export function registerAdminRoutes(app: Hono<Env>, ctx: RouterContext): void {
  const guard = adminGuard(ctx);
  for (const path of ADMIN_PATHS) app.use(path, guard);

  app.get("/workers", (c) =>
    c.json({ workers: ctx.registry.list().map((w) => workerJson(ctx, w)) }),
  );

  app.post("/workers", async (c) => {
    const { url, apiKey, kvEndpoints } = await workerFromBody(c);
    if (kvEndpoints !== undefined && ctx.kvEvents === undefined) {
      throw new RouterError(
        "invalid_request",
        "kv_events_endpoint needs the router started with --kv-events.",
      );
    }
    // Checked before the worker is added: a refused endpoint leaves nothing registered.
    const checked =
      kvEndpoints === undefined ? undefined : await checkedKvEndpoints(ctx, kvEndpoints);
    const worker = await addWorker(ctx, url, apiKey);
    if (checked !== undefined) ctx.kvEvents?.configure(worker, checked);
    return c.json(workerJson(ctx, worker), 201);
  });

  app.get("/workers/:id", (c) => {
    const worker = ctx.registry.get(c.req.param("id"));
    if (!worker) throw unknownWorker(c.req.param("id"));
    return c.json(workerJson(ctx, worker));
  });

  app.delete("/workers/:id", (c) => {
    const worker = removeWorker(ctx, c.req.param("id"));
    return c.json(worker.toJSON());
  });

  // SGLang router compatibility: existing scripts keep working.
  // SGLang's add_worker takes only ?url=; a key goes in the JSON body, not the query string
  // (query strings end up in access logs).
  app.post("/add_worker", async (c) => {
    const worker = await addWorker(ctx, requiredQueryUrl(c), await optionalKeyFromBody(c));
    return c.json({ status: "ok", message: `Added worker ${worker.url}`, worker: worker.toJSON() });
  });
  app.post("/remove_worker", (c) => {
    const worker = removeWorker(ctx, requiredQueryUrl(c));
    return c.json({
      status: "ok",
      message: `Removed worker ${worker.url}`,
      worker: worker.toJSON(),
    });
  });
  app.get("/list_workers", (c) => c.json({ urls: ctx.registry.list().map((w) => w.url) }));
}

/** The admin API's access rule: the admin key when one is set, else loopback clients only. */
export function adminGuard(ctx: RouterContext): MiddlewareHandler<Env> {
  return async (c, next) => {
    const key = ctx.config.adminApiKey;
    if (key !== undefined) {
      if (!bearerMatches(c.req.header("authorization"), key)) {
        throw new RouterError(
          "unauthorized",
          "Admin API key missing or wrong: send Authorization: Bearer <admin key>.",
        );
      }
    } else if (!isLoopback(c.env.incoming.socket.remoteAddress)) {
      throw new RouterError("forbidden", notLoopbackMessage(c.env.incoming.socket.remoteAddress));
    }
    await next();
  };
}

/**
 * The 403 for a client that is not on loopback. Behind Docker's port mapping every request comes
 * from the bridge's address, so the message says which address was seen and how to open the API.
 */
function notLoopbackMessage(remote: string | undefined): string {
  return (
    `The admin API answers loopback clients only while no --admin-api-key is set, and this request came from ${remote ?? "an unknown address"}. ` +
    "Start the router with --admin-api-key <key> (or RADIXGATE_ADMIN_API_KEY) and send Authorization: Bearer <key>; " +
    "in Docker, requests through a published port come from the bridge, not loopback (docs/deployment.md#admin-api-in-docker)."
  );
}

async function addWorker(ctx: RouterContext, url: string, apiKey?: string) {
  const worker = await ctx.registry.addResolved(url, apiKey !== undefined ? { apiKey } : {});
  ctx.logger.info({ worker: worker.id, url: worker.url }, "worker added");
  // Probed before it takes traffic; the answer reports the result ("healthy").
  await ctx.health.probeFirst(worker);
  return worker;
}

function removeWorker(ctx: RouterContext, idOrUrl: string) {
  const worker = ctx.registry.remove(idOrUrl);
  if (!worker) throw unknownWorker(idOrUrl);
  ctx.logger.info(
    { worker: worker.id, url: worker.url, in_flight: worker.inFlight },
    "worker removed",
  );
  return worker;
}

function unknownWorker(idOrUrl: string): RouterError {
  return new RouterError("worker_not_found", `No worker with id or URL "${idOrUrl}".`);
}

function requiredQueryUrl(c: Context<Env>): string {
  const url = c.req.query("url");
  if (!url)
    throw new RouterError(
      "invalid_worker_url",
      "Query parameter url is required, e.g. ?url=http://10.0.0.1:30000",
    );
  return url;
}

const ADD_EXAMPLE =
  'Body must be JSON like {"url": "http://10.0.0.1:30000"} (optionally with "api_key").';

/** A worker as the admin API shows it; with --kv-events, its event stream too. */
function workerJson(ctx: RouterContext, worker: Worker) {
  const kv = ctx.kvEvents;
  if (kv === undefined) return worker.toJSON();
  const endpoints = kv.endpointsOf(worker.id);
  const ranks = kv.rankStatesOf(worker.id);
  return {
    ...worker.toJSON(),
    kv_events: {
      state: kv.stateOf(worker.id) ?? "off",
      endpoint: endpoints?.endpoint ?? null,
      replay_endpoint: endpoints?.replayEndpoint ?? null,
      // Data-parallel engines: each rank's stream (rank r on the endpoints' ports + r).
      ...(ranks !== undefined && ranks.length > 1 ? { rank_states: ranks } : {}),
    },
  };
}

/** `kv_events_endpoint` (+ optional `kv_events_replay_endpoint`): ZMQ tcp:// or ipc:// URLs. */
function kvEndpointsField(fields: {
  kv_events_endpoint?: unknown;
  kv_events_replay_endpoint?: unknown;
}): KvEndpoints | undefined {
  const { kv_events_endpoint: endpoint, kv_events_replay_endpoint: replay } = fields;
  if (endpoint === undefined || endpoint === null) {
    if (replay !== undefined && replay !== null) {
      throw new RouterError(
        "invalid_request",
        "kv_events_replay_endpoint needs kv_events_endpoint.",
      );
    }
    return undefined;
  }
  const zmqUrl = (value: unknown, name: string): string => {
    if (typeof value !== "string" || !/^(tcp|ipc):\/\/\S+$/.test(value)) {
      throw new RouterError(
        "invalid_request",
        `${name} must be a ZMQ endpoint like "tcp://10.0.0.1:5557".`,
      );
    }
    return value;
  };
  return {
    endpoint: zmqUrl(endpoint, "kv_events_endpoint"),
    replayEndpoint:
      replay === undefined || replay === null
        ? undefined
        : zmqUrl(replay, "kv_events_replay_endpoint"),
  };
}

/** The worker-URL rules applied to KV-event endpoints from a client (kv-events/endpoint-rules.ts). */
async function checkedKvEndpoints(ctx: RouterContext, given: KvEndpoints): Promise<KvEndpoints> {
  const rules = {
    allowIpc: ctx.config.kvEventsAllowIpc,
    allowLinkLocal: ctx.config.allowLinkLocalWorkers,
    resolveHost: systemResolver(ctx.config.connectTimeoutSecs * 1000),
  };
  try {
    return {
      endpoint: await checkKvEndpoint(given.endpoint, "kv_events_endpoint", rules),
      replayEndpoint:
        given.replayEndpoint === undefined
          ? undefined
          : await checkKvEndpoint(given.replayEndpoint, "kv_events_replay_endpoint", rules),
    };
  } catch (err) {
    throw new RouterError("invalid_request", (err as Error).message);
  }
}

async function workerFromBody(
  c: Context<Env>,
): Promise<{ url: string; apiKey?: string; kvEndpoints?: KvEndpoints }> {
  checkContentType(c.req.header("content-type"));
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new RouterError("invalid_json", ADD_EXAMPLE);
  }
  const fields = (body ?? {}) as {
    url?: unknown;
    api_key?: unknown;
    kv_events_endpoint?: unknown;
    kv_events_replay_endpoint?: unknown;
  };
  if (typeof fields.url !== "string" || fields.url === "") {
    throw new RouterError("invalid_worker_url", ADD_EXAMPLE);
  }
  const apiKey = apiKeyField(fields.api_key);
  const kvEndpoints = kvEndpointsField(fields);
  return {
    url: fields.url,
    ...(apiKey !== undefined ? { apiKey } : {}),
    ...(kvEndpoints !== undefined ? { kvEndpoints } : {}),
  };
}

/** `{"api_key": "..."}` in an optional JSON body (SGLang-style add_worker). */
async function optionalKeyFromBody(c: Context<Env>): Promise<string | undefined> {
  const raw = await c.req.text();
  if (raw.trim() === "") return undefined;
  checkContentType(c.req.header("content-type"));
  let body: unknown;
  try {
    body = JSON.parse(raw);
  } catch {
    throw new RouterError(
      "invalid_json",
      'The optional body must be JSON like {"api_key": "..."}.',
    );
  }
  return apiKeyField((body as { api_key?: unknown } | null)?.api_key);
}

function apiKeyField(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || value === "") {
    throw new RouterError("invalid_request", "api_key must be a non-empty string.");
  }
  return value;
}
