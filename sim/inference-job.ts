/**
 * An inference request's body as the engine's job: its prompts tokenized (protocol.ts), the model
 * it names chosen among those served, and each prompt salted by its LoRA adapter, as the engines
 * key their caches per adapter (models.ts).
 */
import { chooseModel, type ServedModels, saltForAdapter } from "./models.js";
import type { ResolvedSimOptions, SimFlavor } from "./options.js";
import {
  BadRequest,
  type InferenceEndpoint,
  type InferenceJob,
  parseJob,
  type SimTokenize,
} from "./protocol.js";

/** Throws BadRequest (400) or ModelNotFound (404, models.ts) for what the engine would refuse. */
export function parseInferenceJob(
  endpoint: InferenceEndpoint,
  body: unknown,
  options: ResolvedSimOptions,
  encode: SimTokenize,
): InferenceJob {
  return parseJob(endpoint, body, {
    defaultMaxTokens: options.defaultMaxTokens,
    maxModelLen: options.maxModelLen,
    model: options.model,
    tokenize: encode,
  });
}

/** The job's model chosen among those served, its prompts salted by their adapters (in place). */
export function applyModelChoice(
  job: InferenceJob,
  body: unknown,
  served: ServedModels,
  flavor: SimFlavor,
): void {
  const b = body as Record<string, unknown>;
  const requested = typeof b.model === "string" && b.model.length > 0 ? b.model : undefined;
  const choice = chooseModel(served, flavor, requested, b.lora_path);
  job.model = choice.name;
  const adapter = choice.adapter;
  if (adapter !== undefined) job.adapter = adapter;
  if (adapter !== undefined) job.prompts = job.prompts.map((p) => saltForAdapter(p, adapter));
  // vLLM's and SGLang's cache_salt, SGLang's extra_key (/generate): blocks are never shared
  // across salts, so a salted prompt is cached apart, like an adapter's.
  const salt = [b.cache_salt, b.extra_key].filter((s) => typeof s === "string").join("\u0000");
  if (salt !== "") job.prompts = job.prompts.map((p) => saltForAdapter(p, `\u0000salt:${salt}`));
  const perItem = choice.perItem;
  if (perItem !== undefined) {
    if (perItem.length !== job.prompts.length)
      throw new BadRequest("lora_path must have one entry per prompt", "lora_path");
    job.prompts = job.prompts.map((p, i) => {
      const itemAdapter = perItem[i];
      return itemAdapter === undefined ? p : saltForAdapter(p, itemAdapter);
    });
  }
}
