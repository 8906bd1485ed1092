/**
 * Which workers can take a request for a model, and which model key its prefix-index entry gets.
 *
 * A worker lists what it serves on /v1/models (`Worker.servedModels`, filled by introspection):
 * vLLM lists its served model names and its loaded LoRA adapters (each with `parent` = the base:
 * vllm/entrypoints/openai/serving_models.py, show_available_models); SGLang lists only its served
 * model name (python/sglang/srt/entrypoints/http_server.py, available_models) and takes an adapter
 * as `model: "<base>:<adapter>"`. A worker whose list is unknown serves anything.
 *
 * A name that no listing worker serves gets the router's 404 rather than a trip to a worker: both
 * engines refuse it themselves (vLLM 404 "The model ... does not exist"; current SGLang 400 with
 * the same words, only "<served name>:<adapter>" passing, as its test_strict_model_validation
 * test checks), so routing it would only add a hop to the same refusal.
 */

interface ServingWorker {
  readonly servedModels: ReadonlySet<string> | undefined;
}

/**
 * The worker serves `model` (or its list is unknown), given the model's SGLang adapter base
 * (split off once per call, not per worker).
 */
function serves(worker: ServingWorker, model: string, base: string | undefined): boolean {
  const served = worker.servedModels;
  if (served === undefined || served.has(model)) return true;
  return base !== undefined && served.has(base);
}

/** Every worker has a known list and none serves the model: the router answers 404. */
export function noWorkerServes(
  workers: readonly ServingWorker[],
  model: string | undefined,
): boolean {
  if (model === undefined || workers.length === 0) return false;
  const base = sglangAdapterBase(model);
  return workers.every((w) => w.servedModels !== undefined && !serves(w, model, base));
}

/** The workers among `candidates` that serve the model (the same array when all do). */
export function servingCandidates<W extends ServingWorker>(
  candidates: readonly W[],
  model: string | undefined,
): readonly W[] {
  if (model === undefined) return candidates;
  const base = sglangAdapterBase(model);
  for (const w of candidates) {
    if (!serves(w, model, base)) return candidates.filter((c) => serves(c, model, base));
  }
  return candidates;
}

/**
 * The model under which the request's text goes into the prefix index: its own key when the
 * model is one of several a worker serves (an adapter, or one of several models), since their KV
 * caches are separate; undefined (the shared default) when the fleet serves one model under
 * whatever name, so clients that spell it differently still share one tree, as before.
 */
export function indexModel(
  workers: readonly ServingWorker[],
  model: string | undefined,
): string | undefined {
  if (model === undefined) return undefined;
  const base = sglangAdapterBase(model);
  for (const w of workers) {
    const served = w.servedModels;
    if (served === undefined) continue;
    if (served.has(model) ? served.size > 1 : serves(w, model, base)) return model;
  }
  return undefined;
}

/** "base:adapter" (SGLang's adapter syntax) → "base"; undefined for any other name. */
function sglangAdapterBase(model: string): string | undefined {
  const colon = model.lastIndexOf(":");
  return colon > 0 && colon < model.length - 1 ? model.slice(0, colon) : undefined;
}
