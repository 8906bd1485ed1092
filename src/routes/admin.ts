import type { HttpBindings } from "@hono/node-server";
import type { Context, Hono, MiddlewareHandler } from "hono";
import {
  apiKeyField,
  roleFields,
  type WorkerSpec,
  workerSpecFrom,
} from "../discovery/worker-spec.js";
import { RouterError } from "../errors.js";
import { checkContentType } from "../intake/content-type.js";
import type { Worker } from "../workers/worker.js";
import { adminAllowed } from "./auth.js";
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
    const worker = await ctx.membership.add(await workerFromBody(c), "admin");
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
    const apiKey = await optionalKeyFromBody(c);
    // A prefill or decode worker: ?worker_type=prefill&bootstrap_port=8998 (same names as the JSON).
    const role = roleFields({
      worker_type: c.req.query("worker_type"),
      bootstrap_port: c.req.query("bootstrap_port"),
    });
    const worker = await ctx.membership.add(
      {
        url: requiredQueryUrl(c),
        ...(apiKey !== undefined ? { apiKey } : {}),
        ...(role !== undefined ? { role } : {}),
      },
      "admin",
    );
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
    const remote = c.env.incoming.socket.remoteAddress;
    if (!adminAllowed(key, c.req.header("authorization"), remote)) {
      if (key !== undefined) {
        throw new RouterError(
          "unauthorized",
          "Admin API key missing or wrong: send Authorization: Bearer <admin key>.",
        );
      }
      throw new RouterError("forbidden", notLoopbackMessage(remote));
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

function removeWorker(ctx: RouterContext, idOrUrl: string) {
  const worker = ctx.membership.remove(idOrUrl, "admin");
  if (!worker) throw unknownWorker(idOrUrl);
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
  'Body must be JSON like {"url": "http://10.0.0.1:30000"} (optionally with "api_key", and "worker_type": "prefill" | "decode" with "bootstrap_port" for disaggregation).';

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

async function workerFromBody(c: Context<Env>): Promise<WorkerSpec> {
  checkContentType(c.req.header("content-type"));
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw new RouterError("invalid_json", ADD_EXAMPLE);
  }
  return workerSpecFrom((body ?? {}) as Record<string, unknown>, ADD_EXAMPLE);
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
