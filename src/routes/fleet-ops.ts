/**
 * The SGLang router's fleet-wide operations, answered as it answers them
 * (sgl-model-gateway/src/server.rs routes; core/worker_manager.rs does the work):
 * - POST /flush_cache: every worker (of the request's model, when it names one) flushes its
 *   prefix cache (SGLang's /flush_cache; vLLM's equivalent, /reset_prefix_cache), and the router
 *   forgets what its prefix index claimed for the workers that did;
 * - GET /get_loads (and /v1/loads): each worker's load as SGLang's /get_load reports it, summed
 *   over its data-parallel ranks (num_tokens), -1 where it could not be read;
 * - GET /engine_metrics: every worker's /metrics in one Prometheus text, each series labelled
 *   worker_addr (core/metrics_aggregator.rs);
 * - GET /health_generate: one available worker's /health_generate, relayed (routers/http/router.rs
 *   proxies it to a healthy worker).
 */
import type { HttpBindings } from "@hono/node-server";
import type { Context, Hono } from "hono";
import { mergeMetricsPages } from "../engines/metrics-merge.js";
import { RouterError } from "../errors.js";
import { noAvailableWorkerMessage } from "../workers/no-worker-message.js";
import { planModel } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import { readCappedBody, requestWorker } from "../workers/worker-request.js";
import { adminGuard } from "./admin.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/** Largest answer read from one worker (a /metrics page of a large engine is a few hundred KB). */
const MAX_ANSWER_BYTES = 8 * 1024 * 1024;

export function registerFleetRoutes(app: Hono<Env>, ctx: RouterContext): void {
  const guard = adminGuard(ctx);
  // Admin routes in SGLang's router (its API key guards them): here the admin API's guard.
  app.use("/flush_cache", guard);
  app.use("/get_loads", guard);
  app.use("/v1/loads", guard);

  app.post("/flush_cache", async (c) => c.json(await flushCache(ctx, await modelOf(c))));
  app.get("/get_loads", async (c) => c.json(await workerLoads(ctx)));
  app.get("/v1/loads", async (c) => c.json(await workerLoads(ctx)));
  app.get("/engine_metrics", async () => engineMetrics(ctx));
  app.get("/health_generate", async () => healthGenerate(ctx));
}

/** The model a flush is for: `?model=` or a JSON body's `model`; undefined = every worker. */
async function modelOf(c: Context<Env>): Promise<string | undefined> {
  const query = c.req.query("model");
  if (query !== undefined && query !== "") return query;
  const raw = await c.req.text();
  if (raw.trim() === "") return undefined;
  try {
    const model = (JSON.parse(raw) as { model?: unknown } | null)?.model;
    return typeof model === "string" && model !== "" ? model : undefined;
  } catch {
    throw new RouterError("invalid_json", 'The optional body must be JSON like {"model": "..."}.');
  }
}

interface WorkerAnswer {
  worker: Worker;
  status?: number;
  body?: Buffer;
  error?: string;
}

/** One request to each worker at once, each bounded by the health check's timeout. */
function fanOut(
  ctx: RouterContext,
  workers: readonly Worker[],
  path: (w: Worker) => string,
  method: "GET" | "POST",
): Promise<WorkerAnswer[]> {
  return Promise.all(
    workers.map(async (worker): Promise<WorkerAnswer> => {
      try {
        const res = await requestWorker(worker, path(worker), {
          method,
          timeoutMs: ctx.config.modelsTimeoutMs,
        });
        const body = await readCappedBody(res.body, MAX_ANSWER_BYTES);
        return { worker, status: res.statusCode, body };
      } catch (err) {
        return { worker, error: err instanceof Error ? err.message : String(err) };
      }
    }),
  );
}

function ok(a: WorkerAnswer): boolean {
  return a.status !== undefined && a.status >= 200 && a.status < 300;
}

function failure(a: WorkerAnswer): string {
  return a.error ?? `HTTP ${a.status}`;
}

/**
 * SGLang's FlushCacheResult (protocols/worker_spec.rs): `successful` and `failed` URLs, counts and
 * a message; `cleared_index` adds the workers whose prefix-index entries the router dropped.
 */
export async function flushCache(ctx: RouterContext, model: string | undefined) {
  const all = ctx.registry.list();
  const plan = planModel(all, model, ctx.intake.modelRouting);
  const workers = all.filter(plan.admits);
  // vLLM's counterpart of SGLang's flush (vllm/entrypoints/serve/dev/cache/api_router.py; served
  // with VLLM_SERVER_DEV_MODE=1): a vLLM worker without it reports a failure.
  const path = (w: Worker) => (w.engine === "vllm" ? "/reset_prefix_cache" : "/flush_cache");
  const answers = await fanOut(ctx, workers, path, "POST");
  const successful = answers.filter(ok);
  const failed = answers.filter((a) => !ok(a));
  // The engine forgot its cache: so does the index (an engine that refused keeps its entries).
  for (const { worker } of successful) {
    ctx.index.removeWorker(worker.id);
    ctx.index.addWorker(worker.id);
  }
  const message =
    workers.length === 0
      ? "No HTTP workers available for cache flush"
      : failed.length === 0
        ? `Successfully flushed cache on all ${successful.length} HTTP workers`
        : `Cache flush completed: ${successful.length} succeeded, ${failed.length} failed (out of ${workers.length} HTTP workers)`;
  return {
    successful: successful.map((a) => a.worker.url),
    failed: failed.map((a) => [a.worker.url, failure(a)]),
    total_workers: all.length,
    http_workers: workers.length,
    message,
    cleared_index: successful.map((a) => a.worker.id),
  };
}

/**
 * SGLang's WorkerLoadsResult: `loads` of `{worker, worker_type?, load}`, the load being the sum of
 * `num_tokens` over the ranks SGLang's /get_load lists (-1 when it could not be read: vLLM has no
 * /get_load); beside it, radixgate's own view of each worker (`id`, `in_flight`).
 */
export async function workerLoads(ctx: RouterContext) {
  const workers = ctx.registry.list();
  const answers = await fanOut(ctx, workers, () => "/get_load", "GET");
  const loads = answers.map((a) => {
    const type = a.worker.role.type;
    return {
      worker: a.worker.url,
      ...(type === "regular" ? {} : { worker_type: type }),
      load: ok(a) ? (tokensOf(a.body) ?? -1) : -1,
      id: a.worker.id,
      in_flight: a.worker.inFlight,
    };
  });
  const successful = loads.filter((l) => l.load >= 0).length;
  return {
    loads,
    total_workers: workers.length,
    successful,
    failed: loads.length - successful,
  };
}

/** The sum of `num_tokens` over a /get_load answer's ranks; undefined when it is not that shape. */
function tokensOf(body: Buffer | undefined): number | undefined {
  if (body === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  const ranks = Array.isArray(parsed) ? parsed : [parsed];
  let total = 0;
  for (const rank of ranks) {
    const tokens = (rank as { num_tokens?: unknown } | null)?.num_tokens;
    if (typeof tokens !== "number" || !Number.isFinite(tokens)) return undefined;
    total += tokens;
  }
  return total;
}

/** Every worker's /metrics as one page, each series labelled with its worker's URL. */
async function engineMetrics(ctx: RouterContext): Promise<Response> {
  const workers = ctx.registry.list();
  // SGLang's fan_out_simple_request: 503 "No available workers" when there is none.
  if (workers.length === 0) return new Response("No available workers", { status: 503 });
  const answers = await fanOut(ctx, workers, () => "/metrics", "GET");
  const pages = answers
    .filter(ok)
    .map((a) => ({ workerAddr: a.worker.url, text: (a.body as Buffer).toString("utf8") }));
  return new Response(mergeMetricsPages(pages), {
    headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
  });
}

/**
 * One available worker's own generation check: SGLang's /health_generate (it runs one token), or
 * /health for vLLM, which has no /health_generate. The worker's status is the answer's.
 */
async function healthGenerate(ctx: RouterContext): Promise<Response> {
  const workers = ctx.registry.list().filter((w) => w.available);
  if (workers.length === 0) {
    const error = new RouterError("no_workers_available", noAvailableWorkerMessage(ctx.registry));
    return Response.json(error.toBody(), { status: error.status });
  }
  const worker = workers.find((w) => w.engine !== "vllm") ?? (workers[0] as Worker);
  const path = worker.engine === "vllm" ? "/health" : "/health_generate";
  const [answer] = await fanOut(ctx, [worker], () => path, "GET");
  const headers = { "x-radixgate-worker": worker.id };
  if (answer === undefined || answer.status === undefined) {
    const error = new RouterError(
      "upstream_error",
      `Worker ${worker.id} did not answer GET ${path}: ${answer?.error ?? "no answer"}.`,
    );
    return Response.json(error.toBody(), { status: error.status, headers });
  }
  return new Response(answer.body?.byteLength ? answer.body : null, {
    status: answer.status,
    headers,
  });
}
