import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { withoutSecrets } from "../engines/secret-fields.js";
import { RouterError } from "../errors.js";
import { noAvailableWorkerMessage } from "../workers/no-worker-message.js";
import type { Worker } from "../workers/worker.js";
import { readCappedBody, requestWorker } from "../workers/worker-request.js";
import { admitClient } from "./client-gate.js";
import type { RouterContext } from "./context.js";

type Env = { Bindings: HttpBindings };

/** Largest /v1/models answer read from one worker. */
const MAX_LIST_BYTES = 4 * 1024 * 1024;

/** One entry of an OpenAI model list; the workers' own fields (root, parent, ...) are kept. */
interface ModelCard {
  id: string;
  [field: string]: unknown;
}

/**
 * GET /v1/models: the models and adapters of the whole fleet, merged by id (the first worker to
 * list an id gives its card), asked of every available worker at once. A fleet of workers serving
 * different models or adapters thus shows everything a client may ask for.
 */
export function registerModelsRoute(app: Hono<Env>, ctx: RouterContext): void {
  app.get("/v1/models", async (c) => {
    const status = await (async () => {
      const { config } = ctx;
      const clientAuth = c.req.header("authorization");
      admitClient(ctx, clientAuth);
      const workers = ctx.registry.list().filter((w) => w.available);
      if (workers.length === 0) {
        throw new RouterError("no_workers_available", noAvailableWorkerMessage(ctx.registry));
      }
      // Without a key of its own the router passes the client's on, as on the data plane.
      const forwarded = config.apiKey === undefined ? clientAuth : undefined;
      const timeoutMs = config.modelsTimeoutMs;
      const lists = await Promise.all(
        workers.map((w) => modelsOf(w, forwarded, timeoutMs).catch(() => undefined)),
      );
      const merged = new Map<string, ModelCard>();
      for (const list of lists) {
        for (const card of list ?? []) {
          if (!merged.has(card.id)) merged.set(card.id, withoutSecrets(card) as ModelCard);
        }
      }
      if (lists.every((l) => l === undefined)) {
        throw new RouterError(
          "upstream_error",
          `None of the ${workers.length} available workers answered GET /v1/models.`,
        );
      }
      return { object: "list", data: [...merged.values()] };
    })().catch((err: unknown) => err);
    if (status instanceof RouterError) {
      ctx.metrics.requests.inc({ endpoint: "models", status: String(status.status) });
      return c.json(status.toBody(), status.status as 400);
    }
    if (status instanceof Error) throw status;
    ctx.metrics.requests.inc({ endpoint: "models", status: "200" });
    return c.json(status as object);
  });
}

/** One worker's /v1/models cards; throws on any failure (timeout, status, shape). */
async function modelsOf(
  worker: Worker,
  clientAuth: string | undefined,
  timeoutMs: number,
): Promise<ModelCard[]> {
  const res = await requestWorker(worker, "/v1/models", {
    timeoutMs,
    fallbackAuthorization: clientAuth,
  });
  if (res.statusCode !== 200) {
    res.body.dump().catch(() => {});
    throw new Error(`status ${res.statusCode}`);
  }
  const list = await readCappedBody(res.body, MAX_LIST_BYTES);
  const body = JSON.parse(list.toString("utf8")) as { data?: unknown };
  if (!Array.isArray(body.data)) throw new Error("no data array");
  return body.data.filter(
    (card): card is ModelCard =>
      card !== null && typeof card === "object" && typeof (card as ModelCard).id === "string",
  );
}
