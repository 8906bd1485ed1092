import { engineSaturation } from "../workers/saturation.js";
import type { Filter, SchedulingContext, SchedulingWorker } from "./plugin.js";

/**
 * Keeps the workers that serve the requested model or adapter: those that list it on /v1/models
 * (vLLM lists its loaded LoRA adapters there), or `<listed>:<adapter>` (SGLang's syntax), and
 * those whose list is not known yet. The forwarder's model plan (workers/served-models.ts) has
 * already applied the engine rules to the candidates; this filter states the rule inside a
 * profile, so /debug/route names it, and keeps a profile safe when called on its own.
 */
export class ModelServedFilter implements Filter {
  readonly type = "model-filter";
  readonly failOpen = false;
  constructor(readonly name: string) {}

  admits(worker: SchedulingWorker, ctx: SchedulingContext): boolean {
    const served = worker.servedModels;
    const model = ctx.request.requested;
    if (served === undefined || model === undefined || served.has(model)) return true;
    const colon = model.lastIndexOf(":");
    return colon > 0 && served.has(model.slice(0, colon));
  }
}

/** Keeps the workers that are healthy, not cooling down, and whose breaker admits a request. */
export class AvailableFilter implements Filter {
  readonly type = "health-filter";
  readonly failOpen = false;
  constructor(readonly name: string) {}

  admits(worker: SchedulingWorker): boolean {
    return worker.available !== false;
  }
}

export interface SaturationOptions {
  /** Engine-reported waiting requests at or above which a worker is saturated. */
  readonly queueDepthThreshold: number;
  /** KV-cache usage (0..1) at or above which a worker is saturated (1: never). */
  readonly kvCacheUtilThreshold: number;
}

/**
 * Drops saturated workers, by the rule admission uses (workers/saturation.ts engineSaturation)
 * over the engine's own last fresh report of its queue, as GIE's utilization detector reads it
 * (pkg/epp/flowcontrol/saturationdetector/utilization/README.md; defaults 5 queued, 0.8 KV), with
 * the same fail-open rule: when every candidate is saturated, none is dropped (the request still
 * has to go somewhere; admission control is another stage). A worker without fresh signals is kept
 * (GIE counts stale metrics as saturated; here, engines that expose nothing would never be chosen).
 */
export class SaturationFilter implements Filter {
  readonly type = "saturation-filter";
  readonly failOpen = true;
  private readonly thresholds: { readonly queueDepth: number; readonly kvUsage: number };
  constructor(
    readonly name: string,
    options: SaturationOptions,
  ) {
    this.thresholds = {
      queueDepth: options.queueDepthThreshold,
      kvUsage: options.kvCacheUtilThreshold,
    };
  }

  admits(worker: SchedulingWorker, ctx: SchedulingContext): boolean {
    const load = worker.signals?.load(ctx.now);
    return engineSaturation(load, this.thresholds, load?.queued) === undefined;
  }
}
