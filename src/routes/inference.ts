import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import { RouterError } from "../errors.js";
import type { Endpoint } from "../intake/routing-text.js";
import type { RouterContext } from "./context.js";
import { INFO_ROUTES, registerEngineInfoRoutes } from "./engine-info.js";
import { registerModelsRoute } from "./models.js";

/**
 * POST routes of the data plane and the routing text each one prefills. Beside the OpenAI routes
 * and SGLang's /generate, the engines' other POSTs, each sent to a worker that serves the model:
 * - /v1/responses: vLLM (openai/responses/api_router.py) and SGLang (http_server.py); a request
 *   with previous_response_id goes to the worker that holds that response (routes/responses.ts);
 * - /v1/rerank, /rerank, /v1/score, /score, /classify: vLLM (pooling/score/api_router.py,
 *   pooling/classify/api_router.py); /v1/rerank, /v1/score, /v1/classify: SGLang (http_server.py);
 * - /tokenize, /detokenize: vLLM (serve/tokenize/api_router.py) and SGLang (http_server.py).
 */
export const INFERENCE_ROUTES: ReadonlyArray<{ path: string; endpoint: Endpoint }> = [
  { path: "/v1/chat/completions", endpoint: "chat" },
  { path: "/v1/completions", endpoint: "completions" },
  { path: "/v1/embeddings", endpoint: "embeddings" },
  { path: "/generate", endpoint: "generate" },
  { path: "/v1/responses", endpoint: "responses" },
  { path: "/v1/rerank", endpoint: "rerank" },
  { path: "/rerank", endpoint: "rerank" },
  { path: "/v1/score", endpoint: "score" },
  { path: "/score", endpoint: "score" },
  { path: "/v1/classify", endpoint: "classify" },
  { path: "/classify", endpoint: "classify" },
  { path: "/tokenize", endpoint: "tokenize" },
  { path: "/detokenize", endpoint: "detokenize" },
];

type Env = { Bindings: HttpBindings };

/**
 * The data plane's routes in hono: every method but POST on the inference paths (a 405), the
 * merged model list, and the info routes. The POSTs themselves never reach hono: the server's
 * listener sends them to handleInference directly (routes/router-listener.ts).
 */
export function registerInferenceRoutes(app: Hono<Env>, ctx: RouterContext): void {
  for (const { path } of INFERENCE_ROUTES) {
    app.all(path, (c) => methodNotAllowed(c.req.method, path, "POST"));
  }
  // The fleet's models: every worker's list, merged (routes/models.ts).
  registerModelsRoute(app, ctx);
  app.all("/v1/models", (c) => methodNotAllowed(c.req.method, "/v1/models", "GET"));
  // Model and server info: asked of any available worker, answered without its secrets.
  registerEngineInfoRoutes(app, ctx);
  for (const path of INFO_ROUTES) {
    app.all(path, (c) => methodNotAllowed(c.req.method, path, "GET"));
  }
}

function methodNotAllowed(method: string, path: string, allowed: string): Response {
  const error = new RouterError(
    "method_not_allowed",
    `${method} is not allowed on ${path}; use ${allowed}.`,
  );
  return Response.json(error.toBody(), { status: error.status, headers: { allow: allowed } });
}
