import type { HttpBindings } from "@hono/node-server";
import type { Context, Hono } from "hono";
import { withoutSecrets } from "../engines/secret-fields.js";
import { RouterError } from "../errors.js";
import { noAvailableWorkerMessage } from "../workers/no-worker-message.js";
import { readCappedBody, requestWorker } from "../workers/worker-request.js";
import { admitClient } from "./client-gate.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/**
 * GET routes answered from any available worker's engine (SGLang), under SGLang's names and its
 * router's newer ones (/model_info, /server_info: sgl-model-gateway/src/server.rs, where the
 * get_ names are kept as aliases).
 */
export const INFO_ROUTES = ["/get_model_info", "/get_server_info", "/model_info", "/server_info"];

/** Largest info answer read from one worker (SGLang's server info is tens of KB). */
const MAX_INFO_BYTES = 4 * 1024 * 1024;

/** Workers asked in turn before the route gives up (each bounded by the health-check timeout). */
const MAX_TRIES = 3;

/**
 * SGLang's model and server info, asked by the router of one available worker (with the worker's
 * own key) and answered as the router's own JSON with every secret field removed: SGLang's
 * /get_server_info lists its server arguments, `api_key` and `admin_api_key` among them
 * (engines/secret-fields.ts). Never relayed byte for byte.
 */
export function registerEngineInfoRoutes(app: Hono<Env>, ctx: RouterContext): void {
  for (const path of INFO_ROUTES) {
    app.get(path, async (c) => {
      const answer = await engineInfo(ctx, c, path).catch((err: unknown) => err);
      if (answer instanceof RouterError) {
        ctx.metrics.requests.inc({ endpoint: "models", status: String(answer.status) });
        return c.json(answer.toBody(), answer.status as 400);
      }
      if (answer instanceof Error) throw answer;
      const { status, body, workerId } = answer as InfoAnswer;
      ctx.metrics.requests.inc({ endpoint: "models", status: String(status) });
      c.header("x-radixgate-worker", workerId);
      return c.json(body as object, status as 200);
    });
  }
}

interface InfoAnswer {
  status: number;
  body: unknown;
  workerId: string;
}

async function engineInfo(ctx: RouterContext, c: Context<Env>, path: string): Promise<InfoAnswer> {
  const clientAuth = c.req.header("authorization");
  admitClient(ctx, clientAuth);
  const available = ctx.registry.list().filter((w) => w.available);
  // vLLM serves neither route: ask the others first.
  const sglang = available.filter((w) => w.engine !== "vllm");
  const workers = sglang.length > 0 ? sglang : available;
  if (workers.length === 0) {
    throw new RouterError("no_workers_available", noAvailableWorkerMessage(ctx.registry));
  }
  // Without a key of its own the router passes the client's on, as on the data plane.
  const forwarded = ctx.config.apiKey === undefined ? clientAuth : undefined;
  const start = Math.floor(Math.random() * workers.length);
  let lastError = "no answer";
  for (let i = 0; i < Math.min(MAX_TRIES, workers.length); i++) {
    const worker = workers[(start + i) % workers.length];
    if (worker === undefined) continue;
    try {
      // The engine serves the get_ names (python/sglang/srt/entrypoints/http_server.py).
      const res = await requestWorker(worker, path.replace(/^\/(?!get_)/, "/get_"), {
        timeoutMs: ctx.config.modelsTimeoutMs,
        fallbackAuthorization: forwarded,
      });
      const raw = await readCappedBody(res.body, MAX_INFO_BYTES);
      const body = JSON.parse(raw.toString("utf8")) as unknown;
      return { status: res.statusCode, body: withoutSecrets(body), workerId: worker.id };
    } catch (err) {
      lastError = err instanceof Error ? err.message : String(err);
    }
  }
  throw new RouterError(
    "upstream_error",
    `No available worker gave a JSON answer to GET ${path} (last: ${lastError}).`,
  );
}
