/**
 * A simulated SGLang/vLLM inference server: a real HTTP server (node:http, for precise control of
 * streaming and aborts) in front of the simulated engine and its prefix KV cache. Every response,
 * errors and /health included, carries `x-sim-worker-id: <id>`.
 */

import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { loadLocalTokenizer } from "../src/kv-events/local-tokenizer.js";
import { type Clock, realClock } from "./clock.js";
import {
  bindRankPublishers,
  leastBusyRank,
  makeRanks,
  requestedRank,
  type SimRank,
} from "./dp-ranks.js";
import { DEFAULT_FAULTS, mergeFaults, type SimFaults } from "./faults.js";
import { applyModelChoice, parseInferenceJob } from "./inference-job.js";
import type { PrefixKvCache } from "./kv-cache.js";
import type { SimKvPublisher } from "./kv-publisher.js";
import { LORA_ADMIN_PATHS, type LoraAdminPath, loraAdmin } from "./lora-admin.js";
import { LoraSlots } from "./lora-slots.js";
import { sendMetrics } from "./metrics-page.js";
import { ModelNotFound, modelList } from "./models.js";
import { type ResolvedSimOptions, resolveOptions, type SimWorkerOptions } from "./options.js";
import { INFERENCE_PATHS, methodNotAllowed, OTHER_PATHS, singleHeader } from "./paths.js";
import { PdSide } from "./pd-side.js";
import { POOLING_PATHS, type PoolingRoute, poolingAnswer } from "./pooling.js";
import {
  BadRequest,
  type InferenceEndpoint,
  type InferenceJob,
  type SimTokenize,
} from "./protocol.js";
import { readJsonBody } from "./request-body.js";
import { errorBody } from "./responses.js";
import {
  chatBodyOf,
  ResponseNotFound,
  ResponseStore,
  responseEcho,
  responsesConversation,
} from "./responses-api.js";
import { type ServeContext, sendJson, serveJob } from "./serve.js";
import { modelInfo, SIM_VERSION, serverInfo } from "./server-info.js";
import type { SimStats, SimWorker } from "./sim-worker.js";
import { tokenizeBody } from "./tokenize-request.js";
import { tokenize } from "./tokenizer.js";
import { collectStats, newWorkerCounters, type WorkerCounters } from "./worker-stats.js";

export type { SimFaults } from "./faults.js";
export type { SimFlavor, SimWorkerOptions } from "./options.js";
export type { SimStats, SimWorker } from "./sim-worker.js";

const WORKER_ID_HEADER = "x-sim-worker-id";

export async function startSimWorker(options: SimWorkerOptions = {}): Promise<SimWorker> {
  const resolved = resolveOptions(options);
  const faults = mergeFaults({ ...DEFAULT_FAULTS }, options.faults ?? {});
  const dpSize = options.dpSize ?? 1;
  if (!Number.isInteger(dpSize) || dpSize < 1 || dpSize > 16)
    throw new RangeError(`dpSize must be an integer 1-16, got ${dpSize}`);
  const publishers =
    options.kvEvents === undefined
      ? []
      : await bindRankPublishers(
          dpSize,
          { ...options.kvEvents, host: resolved.host },
          resolved.flavor === "vllm",
        );
  const worker = new HttpSimWorker(resolved, faults, realClock, publishers, dpSize);
  await worker.listen();
  return worker;
}

class HttpSimWorker implements SimWorker {
  readonly flavor: "sglang" | "vllm";
  private readonly pd: PdSide | undefined;
  private readonly server: Server;
  /** Data-parallel ranks, each with its KV cache and scheduler (one without dpSize). */
  private readonly ranks: SimRank[];
  readonly kvEvents: SimKvPublisher | undefined;
  /** The engine's tokenizer: the stand-in, or the tokenizer.json of options.tokenizerPath. */
  private readonly encode: SimTokenize;
  private currentFaults: SimFaults;
  private failRemaining: number;
  private readonly hanging = new Set<ServerResponse>();
  private readonly counters: WorkerCounters = newWorkerCounters();
  private readonly endpointCounts: Record<string, number> = {};
  private lastPriority: number | undefined;
  private lastTrace: { traceparent?: string | undefined; tracestate?: string | undefined } = {};
  private idCounter = 0;
  /** The responses this engine stored (/v1/responses, previous_response_id). */
  private readonly responseStore = new ResponseStore();
  /** Adapters served now, name → path: the launch's, then those loaded or unloaded at run time. */
  private readonly adapters: Map<string, string>;
  private assignedId = "";
  private assignedPort = 0;
  private closing: Promise<void> | undefined;

  constructor(
    private readonly options: ResolvedSimOptions,
    faults: SimFaults,
    clock: Clock,
    readonly kvEventsRanks: readonly SimKvPublisher[] = [],
    dpSize = 1,
  ) {
    this.kvEvents = kvEventsRanks[0];
    this.flavor = options.flavor;
    this.adapters = new Map(options.loraAdapters.map((a) => [a, `/adapters/${a}`]));
    this.encode =
      options.tokenizerPath === undefined
        ? (text) => tokenize(text)
        : loadLocalTokenizer(options.tokenizerPath, "tokenizerPath").encode;
    this.currentFaults = faults;
    this.failRemaining = faults.failFirst;
    // How much slower than the timing model the engine runs now (time scale, slowdown fault).
    const delayFactor = () => this.options.timeScale * this.currentFaults.slowdown;
    this.pd =
      options.role === undefined ? undefined : new PdSide(options.role, options, delayFactor);
    this.ranks = makeRanks(dpSize, options, kvEventsRanks, clock, delayFactor);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) sendJson(res, 500, errorBody(500, `simulator error: ${String(err)}`));
        else res.destroy();
      });
    });
  }

  get id(): string {
    return this.assignedId;
  }

  get role(): "prefill" | "decode" | undefined {
    return this.pd?.role;
  }

  get bootstrapPort(): number | undefined {
    return this.pd?.bootstrapPort;
  }

  /** Rank 0's cache: the whole engine's without data parallelism (capacity, block size). */
  private get kv(): PrefixKvCache {
    return this.ranks[0]!.kv;
  }

  rankRequests(): number[] {
    return this.ranks.map((r) => r.requests);
  }

  get port(): number {
    return this.assignedPort;
  }

  get url(): string {
    const host = this.options.host.includes(":") ? `[${this.options.host}]` : this.options.host;
    return `http://${host}:${this.assignedPort}`;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once("error", reject);
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off("error", reject);
        resolve();
      });
    });
    this.assignedPort = (this.server.address() as AddressInfo).port;
    this.assignedId = this.options.id ?? `sim-${this.assignedPort}`;
    await this.pd?.listen();
  }

  /** Its adapter slots, when it keeps fewer loaded than it lists (options.maxLoras). */
  private loraSlotsMade: LoraSlots | undefined | null = null;
  private get loraSlots(): LoraSlots | undefined {
    if (this.loraSlotsMade === null) {
      const { maxLoras, loraLoadMs, timeScale } = this.options;
      this.loraSlotsMade =
        maxLoras === undefined ? undefined : new LoraSlots(maxLoras, loraLoadMs * timeScale);
    }
    return this.loraSlotsMade;
  }

  /** Adapter loads so far (0 without options.maxLoras). */
  get loraLoads(): number {
    return this.loraSlots?.loads ?? 0;
  }

  stats(): SimStats {
    const stats = collectStats(
      this.assignedId,
      this.counters,
      this.ranks,
      this.hanging.size,
      this.endpointCounts,
      this.lastTrace,
      this.lastPriority,
    );
    if (this.loraSlotsMade != null) stats.loraLoads = this.loraSlotsMade.loads;
    return stats;
  }

  cachedPrefixTokens(promptTokens: readonly number[], rank?: number): number {
    if (rank !== undefined) return this.ranks[rank]?.kv.cachedPrefixTokens(promptTokens) ?? 0;
    return Math.max(...this.ranks.map((r) => r.kv.cachedPrefixTokens(promptTokens)));
  }

  faults(): SimFaults {
    return { ...this.currentFaults, failFirst: this.failRemaining };
  }

  setFaults(f: Partial<SimFaults>): void {
    this.currentFaults = mergeFaults(this.currentFaults, f);
    if (f.failFirst !== undefined) this.failRemaining = this.currentFaults.failFirst;
  }

  clearKvCache(options: { restart?: boolean } = {}): void {
    for (const rank of this.ranks) rank.kv.clearCache(!options.restart);
    if (options.restart) for (const publisher of this.kvEventsRanks) publisher.restart();
  }

  close(): Promise<void> {
    this.closing ??= new Promise<void>((resolve) => {
      for (const publisher of this.kvEventsRanks) void publisher.close();
      for (const rank of this.ranks) rank.engine.stop();
      this.pd?.close();
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
    return this.closing;
  }

  /** --api-key: everything but /health and the simulator's own control paths needs the key. */
  private authorized(req: IncomingMessage, path: string): boolean {
    const key = this.options.apiKey;
    if (key === undefined || path === "/health" || path.startsWith("/_sim/")) return true;
    if (req.headers.authorization === `Bearer ${key}`) return true;
    this.counters.unauthorized += 1;
    return false;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    res.setHeader(WORKER_ID_HEADER, this.assignedId);
    const path = (req.url ?? "/").split("?", 1)[0] as string;
    if (this.pd !== undefined && path.startsWith("/_sim/kv/") && req.method === "GET") {
      // A decode worker asks whether a vLLM transfer id's KV is ready (sim/disaggregation.ts).
      await this.pd.answer(req.url ?? path, res);
      return;
    }
    const known =
      INFERENCE_PATHS[path] !== undefined ||
      POOLING_PATHS[path] !== undefined ||
      OTHER_PATHS.has(path);
    const key = known ? path : "unmatched";
    this.endpointCounts[key] = (this.endpointCounts[key] ?? 0) + 1;

    if (!this.authorized(req, path)) {
      return sendJson(res, 401, { error: "Unauthorized" });
    }
    const endpoint = INFERENCE_PATHS[path];
    if (endpoint !== undefined) {
      // vLLM's OpenAI server has no SGLang-native /generate: FastAPI's 404.
      if (endpoint === "generate" && this.flavor === "vllm")
        return sendJson(res, 404, { detail: "Not Found" });
      if (req.method !== "POST") return methodNotAllowed(res);
      return this.inference(endpoint, req, res);
    }
    const pooling = POOLING_PATHS[path];
    if (pooling !== undefined) {
      if (req.method !== "POST") return methodNotAllowed(res);
      return this.poolingEndpoint(pooling, req, res);
    }
    if (path === "/_sim/faults" && req.method === "POST") return this.postFaults(req, res);
    if (LORA_ADMIN_PATHS.has(path)) return this.loraAdmin(path as LoraAdminPath, req, res);
    if (path === "/flush_cache" || path === "/reset_prefix_cache")
      return this.flushCache(path, req, res);
    if (path === "/tokenize") {
      if (req.method !== "POST") return methodNotAllowed(res);
      return this.tokenizeEndpoint(req, res);
    }
    if (!known) return sendJson(res, 404, { detail: "Not Found" });
    if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed(res);
    switch (path) {
      case "/health":
      case "/health_generate":
        res.writeHead(this.currentFaults.unhealthy ? 503 : 200, { "content-length": 0 });
        res.end();
        return;
      case "/v1/models":
        return sendJson(
          res,
          200,
          modelList(
            this.served,
            this.flavor,
            this.options.maxModelLen,
            Math.floor(Date.now() / 1000),
          ),
        );
      case "/get_model_info":
        // SGLang's native endpoints: a vLLM server answers 404 there.
        if (this.flavor === "vllm") return sendJson(res, 404, { detail: "Not Found" });
        return sendJson(res, 200, modelInfo(this.options));
      case "/get_server_info":
        if (this.flavor === "vllm") return sendJson(res, 404, { detail: "Not Found" });
        return sendJson(
          res,
          200,
          serverInfo(this.options, this.kv, this.ranks.length, this.assignedId),
        );
      case "/get_load":
        // SGLang's load per data-parallel rank (python/sglang/srt/managers/tokenizer_manager.py
        // get_load): vLLM serves no such route.
        if (this.flavor === "vllm") return sendJson(res, 404, { detail: "Not Found" });
        return sendJson(
          res,
          200,
          this.ranks.map((rank, dpRank) => ({
            dp_rank: dpRank,
            num_reqs: rank.engine.running,
            num_waiting_reqs: rank.engine.waiting,
            num_tokens: rank.kv.pinnedBlocks * rank.kv.blockSize,
          })),
        );
      case "/version":
        return sendJson(res, 200, { version: SIM_VERSION });
      case "/metrics":
        return sendMetrics(
          res,
          this.flavor,
          this.options.model,
          this.stats(),
          this.ranks,
          this.loraSlots?.metricsText(this.flavor),
        );
      case "/_sim/faults":
        return sendJson(res, 200, this.faults());
      case "/_sim/stats":
        return sendJson(res, 200, this.stats());
    }
  }

  private async inference(
    endpoint: InferenceEndpoint,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    this.counters.requests++;
    this.lastTrace = {
      traceparent: singleHeader(req.headers.traceparent),
      tracestate: singleHeader(req.headers.tracestate),
    };
    const body = await readJsonBody(req, res, this.options.bodyLimitBytes, this.counters);
    if (body === undefined) return;

    const f = this.currentFaults;
    if (f.status !== null) {
      this.counters.failed++;
      return sendJson(res, f.status, errorBody(f.status, `injected fault: status ${f.status}`));
    }
    if (this.failRemaining > 0) {
      this.failRemaining--;
      this.counters.failed++;
      return sendJson(res, f.failStatus, errorBody(f.failStatus, "injected fault: failFirst"));
    }
    if (f.hang) {
      this.hanging.add(res);
      res.on("close", () => {
        this.hanging.delete(res);
        this.counters.aborted++;
      });
      return;
    }

    let job: InferenceJob;
    let responses: ServeContext["responses"];
    try {
      let jobBody = body;
      if (endpoint === "responses") {
        const b = (body ?? {}) as Record<string, unknown>;
        const conversation = responsesConversation(b, this.responseStore);
        jobBody = chatBodyOf(b, conversation);
        const store = this.responseStore;
        const keep = b.store !== false;
        responses = {
          echo: responseEcho(b),
          completed: (id, text) => {
            if (keep) store.put(id, [...conversation, { role: "assistant", content: text }]);
          },
        };
      }
      job = parseInferenceJob(endpoint, jobBody, this.options, this.encode);
      const b = body as Record<string, unknown>;
      this.lastPriority = typeof b.priority === "number" ? b.priority : undefined;
      job.priority = this.lastPriority ?? 0;
      applyModelChoice(job, body, this.served, this.flavor);
    } catch (err) {
      if (err instanceof ResponseNotFound) {
        this.counters.rejected++;
        return sendJson(res, 404, {
          error: {
            message: err.message,
            type: "invalid_request_error",
            param: "response_id",
            code: 404,
          },
        });
      }
      if (err instanceof ModelNotFound) {
        this.counters.rejected++;
        return sendJson(res, 404, errorBody(404, err.message, "model"));
      }
      if (!(err instanceof BadRequest)) throw err;
      this.counters.rejected++;
      return sendJson(res, 400, errorBody(400, err.message, err.param));
    }
    const named = requestedRank(req.headers, body, this.ranks.length, {
      header: endpoint !== "generate",
      body: this.flavor === "sglang",
    });
    if (named === "invalid") {
      this.counters.rejected++;
      const message = `data-parallel rank must be an integer 0-${this.ranks.length - 1}`;
      return sendJson(res, 400, errorBody(400, message));
    }
    const rank = this.ranks[named ?? leastBusyRank(this.ranks)]!;
    for (const prompt of job.prompts) {
      if (!rank.engine.fits(prompt.length, job.maxTokens)) {
        this.counters.rejected++;
        const message =
          `prompt (${prompt.length} tokens) + max tokens (${job.maxTokens}) exceed the KV cache ` +
          `capacity (${this.kv.totalBlocks * this.kv.blockSize} tokens)`;
        return sendJson(res, 400, errorBody(400, message));
      }
    }
    const worker = { id: this.assignedId, port: this.assignedPort };
    const hooks =
      this.pd === undefined
        ? {}
        : await this.pd.hooksFor(job, body, rank.kv, worker, res, this.counters);
    if (hooks === undefined) return;
    rank.requests++;
    if (job.adapter !== undefined && this.loraSlots !== undefined) {
      // The adapter's load comes before the prefill; the request holds it loaded until it ends.
      const release = await this.loraSlots.acquire(job.adapter);
      res.once("close", release);
    }
    serveJob(
      {
        engine: rank.engine,
        counters: this.counters,
        embeddingDim: this.options.embeddingDim,
        crashAfterChunks: f.crashMidStream,
        nextId: (prefix) => `${prefix}${this.assignedId}-${++this.idCounter}`,
        ...(responses !== undefined ? { responses } : {}),
        ...hooks,
      },
      job,
      res,
    );
  }

  /**
   * vLLM's POST /tokenize (vllm/entrypoints/openai/protocol.py TokenizeCompletionRequest and
   * TokenizeChatRequest; SGLang's /tokenize takes the `prompt` form): `{prompt}` or `{messages}`
   * in, `{count, max_model_len, tokens}` out, with the same template the engine prefills.
   */
  private async tokenizeEndpoint(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJsonBody(req, res, this.options.bodyLimitBytes, this.counters);
    if (body === undefined) return;
    const tokens = tokenizeBody(this.encode, body);
    if (tokens === undefined) {
      this.counters.rejected++;
      return sendJson(res, 400, errorBody(400, "tokenize needs prompt or messages"));
    }
    sendJson(res, 200, { count: tokens.length, max_model_len: this.options.maxModelLen, tokens });
  }

  /**
   * SGLang's /flush_cache (GET or POST: 200 and a line of text, http_server.py) and vLLM's POST
   * /reset_prefix_cache (its dev-mode route, 200 and no body): every rank's cache is emptied.
   */
  private flushCache(path: string, req: IncomingMessage, res: ServerResponse): void {
    const vllm = path === "/reset_prefix_cache";
    if (vllm !== (this.flavor === "vllm")) {
      sendJson(res, 404, { detail: "Not Found" });
      return;
    }
    if (req.method !== "POST" && (vllm || req.method !== "GET")) {
      methodNotAllowed(res);
      return;
    }
    this.clearKvCache();
    req.resume();
    if (vllm) {
      res.writeHead(200, { "content-length": 0 });
      res.end();
      return;
    }
    const text =
      "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n";
    res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
    res.end(text);
  }

  /** The scoring routes and /detokenize (pooling.ts): answered at once, 400 for a bad body. */
  private async poolingEndpoint(
    route: PoolingRoute,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<void> {
    const body = await readJsonBody(req, res, this.options.bodyLimitBytes, this.counters);
    if (body === undefined) return;
    try {
      const answer = poolingAnswer(route, body, {
        flavor: this.flavor,
        model: this.options.model,
        encode: this.encode,
        nextId: (prefix) => `${prefix}${this.assignedId}-${++this.idCounter}`,
      });
      sendJson(res, 200, answer);
    } catch (err) {
      if (!(err instanceof BadRequest)) throw err;
      this.counters.rejected++;
      sendJson(res, 400, errorBody(400, err.message, err.param));
    }
  }

  tokenizeBody(json: unknown): number[] | undefined {
    return tokenizeBody(this.encode, json);
  }

  /** The engines' runtime adapter routes (lora-admin.ts); 404 where the engine does not serve them. */
  private async loraAdmin(path: LoraAdminPath, req: IncomingMessage, res: ServerResponse) {
    if (req.method !== "POST") return methodNotAllowed(res);
    const body = await readJsonBody(req, res, this.options.bodyLimitBytes, this.counters);
    if (body === undefined) return;
    const answer = await loraAdmin(
      {
        flavor: this.flavor,
        runtimeUpdates: this.options.loraRuntimeUpdates,
        maxLoadedLoras: this.options.maxLoadedLoras,
        adapters: this.adapters,
        slots: this.loraSlots,
        loadMs: this.options.loraLoadMs * this.options.timeScale,
      },
      path,
      body,
    );
    if (answer === undefined) return sendJson(res, 404, { detail: "Not Found" });
    if (!answer.text) return sendJson(res, answer.status, answer.body);
    const text = String(answer.body);
    res.writeHead(answer.status, {
      "content-type": "text/plain; charset=utf-8",
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
  }

  private async postFaults(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJsonBody(req, res, this.options.bodyLimitBytes, this.counters);
    if (body === undefined) return;
    try {
      this.setFaults(body as Partial<SimFaults>);
    } catch (err) {
      return sendJson(res, 400, errorBody(400, (err as Error).message));
    }
    sendJson(res, 200, this.faults());
  }

  private get served() {
    return {
      names: [this.options.model, ...this.options.modelAliases],
      adapters: [...this.adapters.keys()],
      paths: this.adapters,
    };
  }
}
