import type { HttpBindings } from "@hono/node-server";
import type { Context, Hono, MiddlewareHandler } from "hono";
import {
  apiKeyField,
  declaredFields,
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

  // Shapes and codes of SGLang's gateway (sgl-model-gateway/src/core/worker_service.rs and
  // protocols/worker_spec.rs), with radixgate's own fields beside SGLang's names.
  app.get("/workers", (c) => {
    const workers = ctx.registry.list();
    const count = (type: string) => workers.filter((w) => w.role.type === type).length;
    return c.json({
      workers: workers.map((w) => workerJson(ctx, w)),
      total: workers.length,
      stats: {
        prefill_count: count("prefill"),
        decode_count: count("decode"),
        regular_count: count("regular"),
      },
    });
  });

  // SGLang queues the add and answers 202 with a Location; here the worker is registered (and
  // probed once) by the time the answer goes out, so the body also carries its record.
  app.post("/workers", async (c) => {
    const worker = await ctx.membership.add(await workerFromBody(c), "admin");
    const location = `/workers/${encodeURIComponent(worker.id)}`;
    c.header("Location", location);
    return c.json(
      {
        ...workerJson(ctx, worker),
        status: "accepted",
        worker_id: worker.id,
        location,
        message: `Added worker ${worker.url}`,
      },
      202,
    );
  });

  app.get("/workers/:id", (c) => {
    const worker = ctx.registry.get(c.req.param("id"));
    if (!worker) throw unknownWorker(c.req.param("id"));
    return c.json(workerJson(ctx, worker));
  });

  // SGLang's WorkerUpdateRequest: priority, cost, labels.
  app.put("/workers/:id", async (c) => {
    const worker = ctx.registry.get(c.req.param("id"));
    if (!worker) throw unknownWorker(c.req.param("id"));
    const update = declaredFields(await updateFromBody(c)) ?? {};
    worker.declare(update);
    return c.json(
      {
        ...workerJson(ctx, worker),
        status: "accepted",
        worker_id: worker.id,
        message: `Updated worker ${worker.url}`,
      },
      202,
    );
  });

  app.delete("/workers/:id", (c) => {
    const worker = removeWorker(ctx, c.req.param("id"));
    return c.json(
      {
        ...worker.toJSON(),
        status: "accepted",
        worker_id: worker.id,
        message: `Removed worker ${worker.url}`,
      },
      202,
    );
  });

  // SGLang router compatibility: existing scripts keep working. SGLang's query struct reads
  // ?url= and ?api_key= (AddWorkerQuery, sgl-router/src/server.rs); a JSON body {"api_key"}
  // works too and stays out of access logs.
  app.post("/add_worker", async (c) => {
    const apiKey = apiKeyField(c.req.query("api_key")) ?? (await optionalKeyFromBody(c));
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

  // A known path with another method: 405 with Allow, as SGLang's axum routes answer.
  const allowed: Record<string, string> = {
    "/workers": "GET, POST",
    "/workers/:id": "GET, PUT, DELETE",
    "/add_worker": "POST",
    "/remove_worker": "POST",
    "/list_workers": "GET",
  };
  for (const [path, allow] of Object.entries(allowed)) {
    app.all(path, (c) => {
      c.header("Allow", allow);
      throw new RouterError("method_not_allowed", `${c.req.method} ${c.req.path}: use ${allow}.`);
    });
  }
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
  'Body must be JSON like {"url": "http://10.0.0.1:30000"} (optionally with "api_key", "model_id", "priority", "cost", "labels", "disable_health_check", "max_running", and "worker_type": "prefill" | "decode" with "bootstrap_port" for disaggregation).';

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
  const body = await parsedJson(c, ADD_EXAMPLE);
  return workerSpecFrom((body ?? {}) as Record<string, unknown>, ADD_EXAMPLE);
}

const UPDATE_FIELDS = ["priority", "cost", "labels"];
const UPDATE_EXAMPLE =
  'Body must be JSON like {"priority": 60, "cost": 1.5, "labels": {"zone": "a"}}.';

/** PUT /workers/:id's body: only what SGLang lets change after adding. */
async function updateFromBody(c: Context<Env>): Promise<Record<string, unknown>> {
  const body = await parsedJson(c, UPDATE_EXAMPLE);
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw new RouterError("invalid_request", UPDATE_EXAMPLE);
  const other = Object.keys(body).filter((k) => !UPDATE_FIELDS.includes(k));
  if (other.length > 0) {
    throw new RouterError(
      "invalid_request",
      `${other.join(", ")} cannot change after adding; remove and add the worker again. ${UPDATE_EXAMPLE}`,
    );
  }
  return body as Record<string, unknown>;
}

async function parsedJson(c: Context<Env>, example: string): Promise<unknown> {
  checkContentType(c.req.header("content-type"));
  try {
    return await c.req.json();
  } catch {
    throw new RouterError("invalid_json", example);
  }
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
