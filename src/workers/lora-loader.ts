import {
  type LoraAnswer,
  type LoraCall,
  loraLoadCall,
  loraUnloadCall,
  readLoraAnswer,
} from "../engines/lora-admin.js";
import { RouterError } from "../errors.js";
import type { Logger } from "../logger.js";
import type { WorkerRegistry } from "./registry.js";
import type { Worker } from "./worker.js";
import { readCappedBody, requestWorker } from "./worker-request.js";

export interface LoraLoaderOptions {
  /** The adapters the operator knows (--lora-paths): name → path as the engines read it. */
  paths: ReadonlyMap<string, string>;
  /** One adapter's load, its unload to make room included, and every wait for it. */
  timeoutMs: number;
  /** Loads under way at once across the fleet. */
  maxInFlight: number;
  /** Adapters one worker holds at most; 0 = the engine's own bound, else none. */
  maxPerWorker: number;
}

/** Largest answer read from a load or unload route (a line of text, or a small JSON object). */
const MAX_ANSWER_BYTES = 64 * 1024;

/** Workers tried for one adapter: a second only when the first's refusal was its own. */
const MAX_TRIES = 2;

/**
 * --lora-load-on-demand: a request names an adapter of --lora-paths that no available worker holds;
 * the loader loads it on the worker with the most room through the engine's own route
 * (engines/lora-admin.ts), and the request is routed again against the fleet as it is then.
 *
 * - One load per adapter at a time: concurrent requests for it wait for the same load.
 * - At most `maxInFlight` loads across the fleet; a load beyond waits within the timeout, then
 *   answers 503 `lora_loads_busy`.
 * - The most room: the fewest adapters held against the worker's bound (--lora-max-adapters-per-
 *   worker, else SGLang's --max-loaded-loras), then the fewest requests in flight. At the bound,
 *   or when the engine refuses for it, the adapter this router loaded there and sent a request
 *   for least recently is unloaded first; adapters the engine was started with are never touched.
 * - Every call is bounded by what is left of the timeout (504 `lora_load_timeout` past it); a
 *   refusal is 502 `lora_load_failed` with the engine's own message.
 */
export class LoraLoader {
  private readonly pending = new Map<string, Promise<void>>();
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly registry: WorkerRegistry,
    readonly options: LoraLoaderOptions,
    private readonly logger: Logger,
  ) {}

  /**
   * The adapter a request names (`adapterNamed`) when it is one of --lora-paths and no available
   * worker holds it; undefined otherwise (nothing to load).
   */
  missing(adapter: string | undefined): string | undefined {
    if (adapter === undefined || !this.options.paths.has(adapter)) return undefined;
    for (const worker of this.registry.candidates()) {
      if (holds(worker, adapter)) return undefined;
    }
    return adapter;
  }

  /** Loads `adapter` somewhere (or waits for the load under way); rejects with a RouterError. */
  load(adapter: string): Promise<void> {
    let loading = this.pending.get(adapter);
    if (loading === undefined) {
      loading = this.loadOnce(adapter).finally(() => this.pending.delete(adapter));
      this.pending.set(adapter, loading);
    }
    return loading;
  }

  private async loadOnce(adapter: string): Promise<void> {
    const deadline = Date.now() + this.options.timeoutMs;
    await this.acquire(deadline);
    try {
      // Loaded meanwhile (a worker came back, another replica loaded it): nothing to do.
      if (this.missing(adapter) === undefined) return;
      const tried = new Set<Worker>();
      let refusal = "no available worker whose engine is known";
      for (let i = 0; i < MAX_TRIES; i++) {
        const worker = this.roomiest(tried);
        if (worker === undefined) break;
        tried.add(worker);
        const outcome = await this.loadOn(worker, adapter, deadline);
        if (outcome === undefined) return;
        refusal = `${worker.id}: ${outcome.message}`;
        if (!outcome.elsewhere) break;
      }
      throw new RouterError(
        "lora_load_failed",
        `The LoRA adapter '${adapter}' could not be loaded (${refusal}).`,
      );
    } finally {
      this.release();
    }
  }

  /** undefined once loaded; else why not, and whether another worker may do better. */
  private async loadOn(
    worker: Worker,
    adapter: string,
    deadline: number,
  ): Promise<{ message: string; elsewhere: boolean } | undefined> {
    const engine = worker.engine!;
    if (room(worker, this.options.maxPerWorker) <= 0) await this.makeRoom(worker, deadline);
    const call = loraLoadCall(engine, adapter, this.options.paths.get(adapter)!);
    let answer = await this.call(worker, call, deadline);
    if (!answer.ok && answer.full && (await this.makeRoom(worker, deadline))) {
      answer = await this.call(worker, call, deadline);
    }
    if (answer.ok || answer.already) {
      worker.servedModels = worker.lora.loaded(adapter, worker.servedModels);
      this.logger.info(
        { worker: worker.id, adapter, path: call.json.lora_path, engine },
        answer.ok ? "LoRA adapter loaded on demand" : "LoRA adapter found loaded",
      );
      return undefined;
    }
    const message = answer.unserved
      ? `it does not serve ${call.path} (vLLM serves it only with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True)`
      : answer.message;
    if (answer.unserved) this.logger.warn({ worker: worker.id, adapter }, message);
    return {
      message,
      elsewhere: answer.unserved || answer.full || answer.network === true,
    };
  }

  /** Unloads the adapter this router loaded there and used least recently; false when none. */
  private async makeRoom(worker: Worker, deadline: number): Promise<boolean> {
    const victim = worker.lora.leastUsed()?.adapter;
    if (victim === undefined) return false;
    const answer = await this.call(worker, loraUnloadCall(worker.engine!, victim), deadline);
    // Gone already (unloaded by someone else) is as good.
    const gone = answer.ok || /cannot be found|does not exist/.test(answer.message);
    if (!gone) return false;
    worker.servedModels = worker.lora.unloaded(victim, worker.servedModels);
    this.logger.info({ worker: worker.id, adapter: victim }, "LoRA adapter unloaded to make room");
    return true;
  }

  private async call(
    worker: Worker,
    call: LoraCall,
    deadline: number,
  ): Promise<(LoraAnswer & { network?: never }) | Refused> {
    const left = deadline - Date.now();
    if (left <= 0) throw timeout(call.json.lora_name);
    try {
      const res = await requestWorker(worker, call.path, {
        method: "POST",
        json: call.json,
        timeoutMs: left,
      });
      const text = (await readCappedBody(res.body, MAX_ANSWER_BYTES)).toString("utf8");
      return readLoraAnswer(res.statusCode, text);
    } catch (err) {
      if (Date.now() >= deadline) throw timeout(call.json.lora_name);
      return {
        ok: false,
        already: false,
        full: false,
        unserved: false,
        network: true,
        message: (err as Error).message,
      };
    }
  }

  /** The available worker with the most room, not tried yet and whose engine is known. */
  private roomiest(tried: ReadonlySet<Worker>): Worker | undefined {
    let best: Worker | undefined;
    let bestRoom = Number.NEGATIVE_INFINITY;
    for (const worker of this.registry.candidates()) {
      if (tried.has(worker) || worker.engine === undefined) continue;
      const r = room(worker, this.options.maxPerWorker);
      const better =
        best === undefined ||
        r > bestRoom ||
        (r === bestRoom &&
          (r <= 0
            ? // Full everywhere: where the adapter to unload was used the longest ago.
              idleSince(worker) < idleSince(best)
            : held(worker) < held(best) ||
              (held(worker) === held(best) && worker.inFlight < best.inFlight)));
      if (better) {
        best = worker;
        bestRoom = r;
      }
    }
    return best;
  }

  private acquire(deadline: number): Promise<void> {
    if (this.running < this.options.maxInFlight) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const go = () => {
        clearTimeout(timer);
        this.running++;
        resolve();
      };
      const timer = setTimeout(
        () => {
          const at = this.waiting.indexOf(go);
          if (at >= 0) this.waiting.splice(at, 1);
          reject(new RouterError("lora_loads_busy", undefined, 1));
        },
        Math.max(0, deadline - Date.now()),
      );
      this.waiting.push(go);
    });
  }

  private release(): void {
    this.running--;
    this.waiting.shift()?.();
  }
}

type Refused = {
  ok: false;
  already: false;
  full: false;
  unserved: false;
  /** No answer (connection refused, reset, the call's timeout). */
  network: true;
  message: string;
};

function timeout(adapter: string): RouterError {
  return new RouterError(
    "lora_load_timeout",
    `Loading the LoRA adapter '${adapter}' took longer than --lora-load-timeout-secs.`,
  );
}

/** The worker lists the adapter, or this router loaded it there. */
function holds(worker: Worker, adapter: string): boolean {
  return worker.lora.adapters?.has(adapter) === true || worker.servedModels?.has(adapter) === true;
}

/** When the adapter this router would unload there was last used; +∞ when there is none. */
function idleSince(worker: Worker): number {
  return worker.lora.leastUsed()?.at ?? Number.POSITIVE_INFINITY;
}

function held(worker: Worker): number {
  return worker.lora.adapters?.size ?? 0;
}

/** Adapters the worker may still take: its bound (the flag's, else the engine's) minus those held. */
function room(worker: Worker, maxPerWorker: number): number {
  const bound = maxPerWorker > 0 ? maxPerWorker : worker.lora.maxLoaded;
  return bound === undefined ? Number.POSITIVE_INFINITY : bound - held(worker);
}
