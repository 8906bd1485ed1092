/**
 * The simulated engine's LoRA adapter slots: at most `maxLoras` adapters loaded at once, least
 * recently used out first (vLLM `--max-loras`, vllm/config/lora.py; SGLang
 * `--max-loras-per-batch`, `lora_eviction_policy` "lru", python/sglang/srt/server_args.py).
 * A request for an adapter that is not loaded waits `loadMs` for its load; concurrent requests
 * for the same adapter share that one load. An adapter with requests in flight is not evicted
 * while another one is idle. vLLM's `vllm:lora_requests_info` gauge (vllm/v1/metrics/loggers.py)
 * shows the adapters running and waiting, and `max_lora`.
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

  /** The vllm:lora_requests_info series, its value the time it was read (as vLLM sets it). */
  metricsText(): string {
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
