/**
 * Which LoRA adapters a worker's engine holds in its adapter slots, as far as the router can
 * tell. Engines list every adapter they can serve on /v1/models, but keep only a few loaded for
 * the batch, least recently used first out: vLLM `--max-loras` (default 1;
 * vllm/config/lora.py), SGLang `--max-loras-per-batch` (default 8, `lora_eviction_policy`
 * "lru"; python/sglang/srt/server_args.py). A request for a listed adapter that is not loaded
 * waits for a load.
 *
 * Two sources, the union counts:
 * - vLLM's `vllm:lora_requests_info` gauge (vllm/v1/metrics/loggers.py): labels
 *   `running_lora_adapters` and `waiting_lora_adapters` (comma-separated) and `max_lora`. It names
 *   only adapters with requests now: an idle adapter still loaded is not in it.
 * - the router's own record of the adapters it sent to the worker, most recent last: the last
 *   `max_lora` of them (the engine's bound, from the gauge, else the engine's default) are taken
 *   as loaded, as the engine's LRU keeps them. SGLang has no such gauge; its record is all there is.
 */

/** Adapters remembered per worker: far more than any engine keeps loaded. */
const MAX_RECORDED = 256;

/** The engines' defaults when they do not say (see above). */
const DEFAULT_MAX_LORAS = { vllm: 1, sglang: 8 } as const;

export interface LoraReading {
  /** Adapters with running or waiting requests now. */
  readonly active: readonly string[];
  /** The engine's bound on adapters loaded at once, when it said. */
  readonly maxLoras?: number | undefined;
}

export class LoraResidency {
  /** Names /v1/models lists as adapters (entries with a `parent`); undefined = not known. */
  adapters: ReadonlySet<string> | undefined;
  private active: ReadonlySet<string> = new Set();
  private activeAt = Number.NEGATIVE_INFINITY;
  private maxLoras: number | undefined;
  /** Adapters this router sent there, least recent first (Map order). */
  private readonly recent = new Map<string, true>();

  /** The engine's report (vLLM's lora_requests_info) at `now` (epoch ms). */
  report(reading: LoraReading, now: number): void {
    this.active = new Set(reading.active);
    this.activeAt = now;
    if (reading.maxLoras !== undefined) this.maxLoras = reading.maxLoras;
  }

  /** The router sent a request for `adapter` there: the engine loads it if it was not. */
  routed(adapter: string): void {
    if (this.adapters !== undefined && !this.adapters.has(adapter)) return;
    this.recent.delete(adapter);
    this.recent.set(adapter, true);
    if (this.recent.size > MAX_RECORDED) this.recent.delete(this.recent.keys().next().value!);
  }

  /**
   * Whether `adapter` is loaded there now: true, false, or undefined when not known (not an
   * adapter the worker lists as one, or nothing known of its engine's bound). A report older
   * than `staleAfterMs` no longer counts.
   */
  resident(
    adapter: string,
    now: number,
    engine: "vllm" | "sglang" | undefined,
    staleAfterMs = Number.POSITIVE_INFINITY,
  ): boolean | undefined {
    if (this.adapters === undefined || !this.adapters.has(adapter)) return undefined;
    if (now - this.activeAt <= staleAfterMs && this.active.has(adapter)) return true;
    const bound = this.maxLoras ?? (engine === undefined ? undefined : DEFAULT_MAX_LORAS[engine]);
    if (bound === undefined) return undefined;
    if (!this.recent.has(adapter)) return false;
    // Among the `bound` most recent? Walk from the newest (a Map iterates oldest first).
    let newer = 0;
    let seen = false;
    for (const name of this.recent.keys()) {
      if (seen) newer++;
      else if (name === adapter) seen = true;
    }
    return newer < bound;
  }

  /** For GET /workers: what the router believes. */
  toJSON(): { active: string[]; max_loras: number | null; recent: string[] } {
    return {
      active: [...this.active],
      max_loras: this.maxLoras ?? null,
      recent: [...this.recent.keys()].reverse().slice(0, 16),
    };
  }
}
