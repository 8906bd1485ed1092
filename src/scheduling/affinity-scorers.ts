import type { SchedulingContext, Scorer } from "./plugin.js";

/**
 * 1 for the worker this conversation was last sent to, 0 for the others (llm-d
 * session-affinity-scorer). A profile with this scorer weighs the session against load and
 * prefixes instead of the decider pinning the session's worker (--session-affinity).
 */
export class SessionAffinityScorer implements Scorer {
  readonly type = "session-affinity-scorer";
  readonly usesPrefixes = false;
  constructor(readonly name: string) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates } = ctx;
    const id = ctx.request.sessionWorker;
    for (let i = 0; i < candidates.length; i++) out[i] = candidates[i]!.id === id ? 1 : 0;
  }
}

/**
 * LoRA affinity (GIE lora-affinity-scorer: 1 when the adapter is already loaded, lower when it
 * would have to be loaded): 1 when the worker lists the requested adapter (or model) on
 * /v1/models and its engine holds it loaded or that is not known (workers/lora-residency.ts);
 * `loadScore` when it lists the adapter but holds it unloaded (a load before the prefill);
 * `unknownScore` when its list is not known yet; 0 when it lists others. Every worker scores 1
 * when the request names neither.
 */
export class LoraAffinityScorer implements Scorer {
  readonly type = "lora-affinity-scorer";
  readonly usesPrefixes = false;
  constructor(
    readonly name: string,
    private readonly unknownScore: number,
    private readonly loadScore = 0.5,
  ) {}

  score(ctx: SchedulingContext, out: Float64Array): void {
    const { candidates } = ctx;
    const wanted = ctx.request.adapter ?? ctx.request.requested;
    for (let i = 0; i < candidates.length; i++) {
      const worker = candidates[i]!;
      const served = worker.servedModels;
      out[i] =
        wanted === undefined
          ? 1
          : served === undefined
            ? this.unknownScore
            : !served.has(wanted)
              ? 0
              : worker.loraResident?.(wanted, ctx.now) === false
                ? this.loadScore
                : 1;
    }
  }
}
