import type { EngineKind } from "../engines/engine-reading.js";

/**
 * Which workers can take a request for a model, and which key its prefix-index entry gets.
 *
 * A worker lists what it serves on /v1/models (`Worker.servedModels`, filled by introspection):
 * vLLM lists its served model names and its loaded LoRA adapters (each with `parent` = the base:
 * vllm/entrypoints/openai/serving_models.py, show_available_models); SGLang lists only its served
 * model name (python/sglang/srt/entrypoints/http_server.py, available_models) and takes an adapter
 * as `model: "<base>:<adapter>"` or as `lora_path`.
 *
 * The engines differ on a name they do not list. vLLM refuses it: 404 "The model `x` does not
 * exist." (vllm/entrypoints/openai/engine/serving.py, OpenAIServing._check_model). SGLang runs its
 * one model whatever the name (no model check in serving_chat.py / serving_completions.py
 * `_validate_request`; its docs send "default"). So the model decides the workers only where it
 * disambiguates (`--model-routing engine`, the default):
 * - a name some worker lists (or `<listed>:<adapter>`) goes to those workers, and to workers whose
 *   list is not known;
 * - a name no worker lists goes to the workers that accept any name: SGLang, and workers that
 *   list nothing (or were not read yet); only when there is none does the router answer 404.
 * `--model-routing strict` treats SGLang like vLLM: a name no worker lists goes only to workers
 * whose list is unknown, and gets the router's 404 when every list is known.
 */

export type ModelRoutingMode = "strict" | "engine";
export const MODEL_ROUTING_MODES: readonly ModelRoutingMode[] = ["strict", "engine"];

export interface ServingWorker {
  readonly id?: string;
  readonly servedModels: ReadonlySet<string> | undefined;
  /** The engine introspection recognised; undefined until known. */
  readonly engine?: EngineKind | undefined;
}

/** How a request's model picks its workers (shown by /debug/route). */
export type ModelRoute =
  /** No model named: every worker. */
  | "unnamed"
  /** Some worker lists the model: those workers (and those whose list is unknown). */
  | "listed"
  /** No worker lists it: the workers that accept any name. */
  | "any_name"
  /** No worker lists it and none accepts any name: the router answers 404. */
  | "not_found"
  /** Every registered worker runs an engine that does not serve the endpoint: the router's 404. */
  | "endpoint_not_served";

export interface ModelPlan {
  readonly route: ModelRoute;
  /**
   * With route "endpoint_not_served": why the workers' engine does not serve the endpoint, the
   * words of the router's 404, made with the plan so the forward stage needs nothing more.
   */
  readonly unserved?: string | undefined;
  /** The worker may take the request. */
  admits(worker: ServingWorker): boolean;
  /** Why the model leaves a worker out (for /debug/route); undefined when it admits it. */
  exclusion(worker: ServingWorker): string | undefined;
}

/**
 * Endpoints an engine does not serve, by the route label intake gives them. vLLM's OpenAI server
 * has no SGLang-native /generate (vllm/entrypoints/openai/api_server.py registers the OpenAI
 * routes, /tokenize, /pooling, /score, /rerank..., never /generate; the sim's vLLM mode answers
 * it 404 as vLLM does). A worker whose engine is not known yet is not left out.
 */
const UNSERVED: Readonly<Record<string, { engine: EngineKind; why: string }>> = {
  generate: {
    engine: "vllm",
    why: "vLLM's OpenAI server does not serve POST /generate (SGLang's native API)",
  },
};

/** Why the worker's engine does not serve the endpoint; undefined when it does (or may). */
export function unservedBy(worker: ServingWorker, endpoint: string | undefined) {
  const rule = endpoint === undefined ? undefined : UNSERVED[endpoint];
  return rule !== undefined && worker.engine === rule.engine ? rule.why : undefined;
}

/**
 * Decides, once per request over the registered workers, which of them the model admits and,
 * given the request's endpoint, whose engine serves that endpoint.
 */
export function planModel(
  workers: readonly ServingWorker[],
  model: string | undefined,
  mode: ModelRoutingMode,
  endpoint?: string,
): ModelPlan {
  const byModel = planByModel(workers, model, mode);
  if (endpoint === undefined || UNSERVED[endpoint] === undefined) return byModel;
  const unserved =
    workers.length > 0 && workers.every((w) => unservedBy(w, endpoint) !== undefined)
      ? UNSERVED[endpoint]?.why
      : undefined;
  return {
    route: unserved === undefined ? byModel.route : "endpoint_not_served",
    unserved,
    admits: (w) => unservedBy(w, endpoint) === undefined && byModel.admits(w),
    exclusion: (w) => unservedBy(w, endpoint) ?? byModel.exclusion(w),
  };
}

function planByModel(
  workers: readonly ServingWorker[],
  model: string | undefined,
  mode: ModelRoutingMode,
): ModelPlan {
  if (model === undefined) return EVERY_WORKER;
  const base = sglangAdapterBase(model);
  const lists = (w: ServingWorker) =>
    w.servedModels !== undefined &&
    (w.servedModels.has(model) || (base !== undefined && w.servedModels.has(base)));
  if (workers.some(lists)) {
    return plan(
      "listed",
      (w) => w.servedModels === undefined || lists(w),
      () => `does not list '${model}', which another worker lists`,
    );
  }
  const anyName =
    mode === "engine"
      ? (w: ServingWorker) => w.servedModels === undefined || w.engine === "sglang"
      : (w: ServingWorker) => w.servedModels === undefined;
  const route = workers.length > 0 && !workers.some(anyName) ? "not_found" : "any_name";
  return plan(route, anyName, (w) => {
    const engine = w.engine === undefined ? "its engine" : w.engine;
    return mode === "strict"
      ? `does not list '${model}' (--model-routing strict)`
      : `does not list '${model}', and ${engine} refuses names it does not list`;
  });
}

/**
 * The LoRA adapter a request names, as the engines take it: SGLang's `lora_path` (`adapter`, which
 * SGLang prefers unless the model names its own), the adapter of `<base>:<adapter>`, else the
 * model itself (vLLM serves an adapter under its own name); undefined when it names nothing.
 */
export function adapterNamed(
  requested: string | undefined,
  adapter: string | undefined,
): string | undefined {
  if (requested === undefined) return adapter;
  const base = sglangAdapterBase(requested);
  if (base !== undefined) return requested.slice(base.length + 1);
  return adapter ?? requested;
}

/**
 * The plan narrowed to the workers that list the adapter (and those whose list is not known) when
 * some worker lists it: SGLang refuses an adapter it has not loaded (400), whatever `model` says,
 * and its `lora_path` or `<base>:<adapter>` does not show in the model's plan.
 */
export function holdingAdapter(
  plan: ModelPlan,
  workers: readonly ServingWorker[],
  adapter: string | undefined,
): ModelPlan {
  if (adapter === undefined) return plan;
  const holds = (w: ServingWorker) => w.servedModels === undefined || w.servedModels.has(adapter);
  if (!workers.some((w) => w.servedModels?.has(adapter) === true)) return plan;
  return {
    route: plan.route,
    unserved: plan.unserved,
    admits: (w) => holds(w) && plan.admits(w),
    exclusion: (w) =>
      plan.exclusion(w) ??
      (holds(w) ? undefined : `does not hold the adapter '${adapter}', which another worker holds`),
  };
}

/**
 * The plan narrowed to the one worker that holds what the request continues (a Responses API
 * `previous_response_id`, workers/response-holders.ts): no other worker can serve it.
 */
export function pinnedTo(plan: ModelPlan, workerId: string, why: string): ModelPlan {
  const holds = (w: ServingWorker) => w.id === workerId;
  return {
    route: plan.route,
    unserved: plan.unserved,
    admits: (w) => holds(w) && plan.admits(w),
    exclusion: (w) => (holds(w) ? plan.exclusion(w) : why),
  };
}

const EVERY_WORKER: ModelPlan = {
  route: "unnamed",
  admits: () => true,
  exclusion: () => undefined,
};

function plan(
  route: ModelRoute,
  admits: (w: ServingWorker) => boolean,
  why: (w: ServingWorker) => string,
): ModelPlan {
  return { route, admits, exclusion: (w) => (admits(w) ? undefined : why(w)) };
}

/** The workers among `candidates` that the plan admits (the same array when all are). */
export function admitted<W extends ServingWorker>(candidates: readonly W[], plan: ModelPlan) {
  if (plan === EVERY_WORKER) return candidates;
  for (const w of candidates) if (!plan.admits(w)) return candidates.filter(plan.admits);
  return candidates;
}

/**
 * The key under which the request's text goes into the prefix index, since KV is not shared
 * across adapters nor across the models of one worker:
 * - the model itself when it is one of several a worker serves, or an adapter (vLLM's adapter
 *   name, SGLang's `<base>:<adapter>`); none (the shared default) when the fleet serves one model
 *   under whatever name, so clients that spell it differently still share one tree;
 * - with an SGLang `lora_path` (`adapter`, see intake/routing-text.ts adapterOf) and a model
 *   without its own `:adapter` (SGLang's priority, serving_base.py `_resolve_lora_path`), the
 *   adapter's name: SGLang runs one base model, so the adapter alone names the KV, and the
 *   precise index finds the adapter of the engine's KV events under that name (loraFor).
 */
export function indexKey(
  workers: readonly ServingWorker[],
  model: string | undefined,
  adapter?: string | undefined,
): string | undefined {
  if (adapter === undefined || (model !== undefined && sglangAdapterBase(model) !== undefined))
    return modelKey(workers, model);
  return adapter;
}

function modelKey(workers: readonly ServingWorker[], model: string | undefined) {
  if (model === undefined) return undefined;
  const base = sglangAdapterBase(model);
  for (const w of workers) {
    const served = w.servedModels;
    if (served === undefined) continue;
    if (served.has(model) ? served.size > 1 : base !== undefined && served.has(base)) return model;
  }
  return undefined;
}

/** "base:adapter" (SGLang's adapter syntax) → "base"; undefined for any other name. */
function sglangAdapterBase(model: string): string | undefined {
  const colon = model.lastIndexOf(":");
  return colon > 0 && colon < model.length - 1 ? model.slice(0, colon) : undefined;
}
