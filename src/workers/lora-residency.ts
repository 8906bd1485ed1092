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

/**
 * A logical clock for "which was used longer ago" across workers: a count, not a time, so two
 * uses in the same millisecond still come in order.
 */
let ticks = 0;

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
  /**
   * Names /v1/models lists as adapters (entries with a `parent`), and those this router loaded
   * there (--lora-load-on-demand); undefined = not known.
   */
  adapters: ReadonlySet<string> | undefined;
  /** Adapters this router loaded there through the engine's load route, and when (a tick). */
  readonly onDemand = new Map<string, number>();
  /** SGLang's --max-loaded-loras (/get_server_info), when it said: loads beyond it are refused. */
  maxLoaded: number | undefined;
  private active: ReadonlySet<string> = new Set();
  private activeAt = Number.NEGATIVE_INFINITY;
  private maxLoras: number | undefined;
  /** Adapters this router sent there, least recent first (Map order), and when (a tick). */
  private readonly recent = new Map<string, number>();

  /**
   * The engine's /v1/models read: `served` every id, `adapters` those with a parent. Returns what
   * the worker serves. An engine that lists adapters (vLLM, recent SGLang) is the truth about the
   * ones this router loaded: one it no longer lists was unloaded by someone else. One that lists
   * none (older SGLang lists its base model only) keeps the router's own record in the list.
   */
  listed(served: ReadonlySet<string> | undefined, adapters: ReadonlySet<string>, vllm: boolean) {
    if (vllm || adapters.size > 0) {
      for (const name of this.onDemand.keys()) if (!adapters.has(name)) this.onDemand.delete(name);
    }
    const mine = [...this.onDemand.keys()];
    this.adapters = mine.length === 0 ? adapters : new Set([...adapters, ...mine]);
    if (served === undefined || mine.length === 0) return served;
    return new Set([...served, ...mine]);
  }

  /** The router loaded `adapter` there (or found it loaded); `served` gains it. */
  loaded(adapter: string, served: ReadonlySet<string> | undefined): ReadonlySet<string> {
    this.onDemand.set(adapter, ++ticks);
    this.adapters = new Set([...(this.adapters ?? []), adapter]);
    return new Set([...(served ?? []), adapter]);
  }

  /** The router unloaded `adapter` there; `served` loses it. */
  unloaded(adapter: string, served: ReadonlySet<string> | undefined) {
    this.onDemand.delete(adapter);
    this.recent.delete(adapter);
    if (this.adapters !== undefined) {
      const rest = new Set(this.adapters);
      rest.delete(adapter);
      this.adapters = rest;
    }
    if (served === undefined) return served;
    const rest = new Set(served);
    rest.delete(adapter);
    return rest;
  }

  /**
   * Of the adapters this router loaded there, the one it last sent a request for (or loaded,
   * when none went since) the longest ago, and when that was.
   */
  leastUsed(): { adapter: string; at: number } | undefined {
    let least: { adapter: string; at: number } | undefined;
    for (const [adapter, loadedAt] of this.onDemand) {
      const at = Math.max(loadedAt, this.recent.get(adapter) ?? loadedAt);
      if (least === undefined || at < least.at) least = { adapter, at };
    }
    return least;
  }

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
    this.recent.set(adapter, ++ticks);
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
  toJSON() {
    return {
      active: [...this.active],
      max_loras: this.maxLoras ?? null,
      recent: [...this.recent.keys()].reverse().slice(0, 16),
      loaded_on_demand: [...this.onDemand.keys()],
    };
  }
}
