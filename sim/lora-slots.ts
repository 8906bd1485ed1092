/**
 * The simulated engine's LoRA adapter slots: at most `maxLoras` adapters loaded at once, least
 * recently used out first (vLLM `--max-loras`, vllm/config/lora.py; SGLang
 * `--max-loras-per-batch`, `lora_eviction_policy` "lru", python/sglang/srt/server_args.py).
 * A request for an adapter that is not loaded waits `loadMs` for its load; concurrent requests
 * for the same adapter share that one load. An adapter with requests in flight is not evicted
 * while another one is idle. vLLM's `vllm:lora_requests_info` gauge (vllm/v1/metrics/loggers.py)
 * shows the adapters running and waiting, and `max_lora`; SGLang's pool gauges
 * (python/sglang/srt/metrics/collector.py: `sglang:lora_pool_slots_used`, `_slots_total` =
 * max_loras_per_batch, `_utilization`) show only how many slots are taken, not which adapters.
 */
export class LoraSlots {
  /** Loaded adapters, least recently used first (Map order). */
  private readonly loaded = new Map<string, true>();
  private readonly loading = new Map<string, Promise<void>>();
  private readonly running = new Map<string, number>();
  private readonly waiting = new Map<string, number>();
  /** Loads so far. */
  loads = 0;

  constructor(
    readonly maxLoras: number,
    /** Real ms a load takes. */
    private readonly loadMs: number,
  ) {}

  /** Waits until `adapter` is loaded; the answer releases the request's hold on it. */
  async acquire(adapter: string): Promise<() => void> {
    bump(this.waiting, adapter, 1);
    try {
      while (!this.loaded.has(adapter)) {
        const pending = this.loading.get(adapter) ?? this.load(adapter);
        await pending;
      }
    } finally {
      bump(this.waiting, adapter, -1);
    }
    this.loaded.delete(adapter);
    this.loaded.set(adapter, true);
    bump(this.running, adapter, 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      bump(this.running, adapter, -1);
    };
  }

  private load(adapter: string): Promise<void> {
    this.loads++;
    const done = new Promise<void>((resolve) => {
      setTimeout(resolve, this.loadMs);
    }).then(() => {
      this.loading.delete(adapter);
      while (this.loaded.size >= this.maxLoras) this.evictOne();
      this.loaded.set(adapter, true);
    });
    this.loading.set(adapter, done);
    return done;
  }

  /** Resolves once no request holds `adapter` (SGLang's unload waits for them). */
  async idle(adapter: string): Promise<void> {
    while ((this.running.get(adapter) ?? 0) > 0 || (this.waiting.get(adapter) ?? 0) > 0) {
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** The adapter leaves its slot (unloaded). */
  drop(adapter: string): void {
    this.loaded.delete(adapter);
  }

  /** The least recently used idle adapter, else the least recently used one. */
  private evictOne(): void {
    let victim: string | undefined;
    for (const name of this.loaded.keys()) {
      if ((this.running.get(name) ?? 0) === 0) {
        victim = name;
        break;
      }
      victim ??= name;
    }
    if (victim !== undefined) this.loaded.delete(victim);
  }

  /** The engine's LoRA series: vLLM's lora_requests_info, or SGLang's pool gauges. */
  metricsText(flavor: "vllm" | "sglang" = "vllm"): string {
    if (flavor === "sglang") {
      const used = this.loaded.size;
      return (
        "# TYPE sglang:lora_pool_slots_used gauge\n" +
        `sglang:lora_pool_slots_used ${used}.0\n` +
        "# TYPE sglang:lora_pool_slots_total gauge\n" +
        `sglang:lora_pool_slots_total ${this.maxLoras}.0\n` +
        "# TYPE sglang:lora_pool_utilization gauge\n" +
        `sglang:lora_pool_utilization ${used / this.maxLoras}\n`
      );
    }
    // Its value the time it was read (as vLLM sets it).
    const names = (m: Map<string, number>) => [...m.keys()].join(",");
    return (
      "# HELP vllm:lora_requests_info Running stats on lora requests.\n" +
      "# TYPE vllm:lora_requests_info gauge\n" +
      `vllm:lora_requests_info{max_lora="${this.maxLoras}",running_lora_adapters="${names(this.running)}",` +
      `waiting_lora_adapters="${names(this.waiting)}"} ${Date.now() / 1000}\n`
    );
  }
}

function bump(counts: Map<string, number>, name: string, by: number): void {
  const n = (counts.get(name) ?? 0) + by;
  if (n <= 0) counts.delete(name);
  else counts.set(name, n);
}
