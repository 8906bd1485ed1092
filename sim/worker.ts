/**
 * A simulated SGLang/vLLM inference server: a real HTTP server (node:http, for precise control of
 * streaming and aborts) in front of the simulated engine and its prefix KV cache. Every response,
 * errors and /health included, carries `x-sim-worker-id: <id>`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { loadLocalTokenizer } from "../src/kv-events/local-tokenizer.js";
import { type Clock, realClock } from "./clock.js";
import { bindRankPublishers, leastBusyRank, requestedRank, type SimRank } from "./dp-ranks.js";
import { Engine } from "./engine.js";
import { DEFAULT_FAULTS, mergeFaults, type SimFaults } from "./faults.js";
import { PrefixKvCache } from "./kv-cache.js";
import type { SimKvPublisher } from "./kv-publisher.js";
import { METRICS_CONTENT_TYPE, renderMetrics } from "./metrics.js";
import { chooseModel, ModelNotFound, modelList, saltForAdapter } from "./models.js";
import { type ResolvedSimOptions, resolveOptions, type SimWorkerOptions } from "./options.js";
import { PdSide } from "./pd-side.js";
import { priorityOrderOf } from "./priority-order.js";
import { BadRequest, type InferenceEndpoint, parseJob, type SimTokenize } from "./protocol.js";
import { errorBody } from "./responses.js";
import { type ServeCounters, sendJson, serveJob } from "./serve.js";
import { renderChat } from "./template.js";
import { tokenize } from "./tokenizer.js";

export type { SimFaults } from "./faults.js";
export type { SimFlavor, SimWorkerOptions } from "./options.js";

const WORKER_ID_HEADER = "x-sim-worker-id";

export interface SimStats {
  id: string;
  /** Inference requests received (every endpoint that runs the engine), faulted ones included. */
  requests: number;
  /** Sequences running or waiting in the engine, plus requests held by the hang fault. */
  inFlight: number;
  running: number;
  waiting: number;
  hanging: number;
  /** Inference responses sent in full. */
  completed: number;
  /** Inference requests whose client disconnected before the response was complete. */
  aborted: number;
  /** Streams cut by the crashMidStream fault. */
  crashed: number;
  /** Requests answered with an injected fault status (status, failFirst). */
  failed: number;
  /** Requests answered 4xx for bad input. */
  rejected: number;
  /** Requests answered 401 for a missing or wrong --api-key. */
  unauthorized: number;
  /** Prompt tokens admitted to the engine, and of those the ones found in the prefix cache. */
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** Fraction of KV blocks held by running requests. */
  kvUsage: number;
  /** KV blocks evicted from the prefix cache so far. */
  kvEvictions: number;
  /** Requests per path (unknown paths under "unmatched"). */
  endpoints: Record<string, number>;
  /**
   * The W3C trace context of the last inference request: what vLLM and SGLang read to join the
   * caller's trace (vllm/tracing.py extract_trace_context; SGLang --enable-trace).
   */
  lastTraceparent: string | undefined;
  lastTracestate: string | undefined;
  /** The `priority` field of the last inference request's body (undefined when it had none). */
  lastPriority: number | undefined;
}

export interface SimWorker {
  readonly id: string;
  readonly url: string;
  readonly port: number;
  readonly flavor: "sglang" | "vllm";
  /** Prefill or decode with disaggregation (sim/disaggregation.ts); undefined for a regular worker. */
  readonly role: "prefill" | "decode" | undefined;
  /** An SGLang prefill worker's bootstrap server port (what the router's --prefill URL PORT names). */
  readonly bootstrapPort: number | undefined;
  stats(): SimStats;
  faults(): SimFaults;
  setFaults(f: Partial<SimFaults>): void;
  /** The KV-event publisher, when started with `kvEvents` (rank 0's, with `dpSize`). */
  readonly kvEvents: SimKvPublisher | undefined;
  /** Every data-parallel rank's KV-event publisher, rank 0 first (empty without `kvEvents`). */
  readonly kvEventsRanks: readonly SimKvPublisher[];
  /** Inference requests each data-parallel rank served, rank 0 first. */
  rankRequests(): number[];
  /**
   * Drops every cached block nobody holds. `restart` models an engine restart: nothing is
   * announced and the event sequence starts again at 0; otherwise AllBlocksCleared is published
   * (vLLM's reset_prefix_cache).
   */
  clearKvCache(options?: { restart?: boolean }): void;
  /**
   * Tokens of this prompt the engine would find cached now (benchmark diagnostics): on one
   * data-parallel rank, or the best rank's.
   */
  cachedPrefixTokens(promptTokens: readonly number[], rank?: number): number;
  /**
   * The tokens its POST /tokenize answers for this body (`{prompt}` or `{messages}`, with the
   * engine's own tokenizer), or undefined when the body has neither (the endpoint answers 400).
   */
  tokenizeBody(body: unknown): number[] | undefined;
  /** Closes the server and destroys open sockets (hanging and streaming requests included). */
  close(): Promise<void>;
}

const INFERENCE_PATHS: Readonly<Record<string, InferenceEndpoint>> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "completions",
  "/generate": "generate",
  "/v1/embeddings": "embeddings",
};

const OTHER_PATHS = new Set([
  "/health",
  "/health_generate",
  "/v1/models",
  "/get_model_info",
  "/get_server_info",
  "/version",
  "/metrics",
  "/tokenize",
  "/_sim/faults",
  "/_sim/stats",
]);

const SIM_VERSION = "0.0.0-sim";

class BodyTooLarge extends Error {}

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
  private readonly counters: ServeCounters & {
    requests: number;
    failed: number;
    rejected: number;
    unauthorized: number;
  } = {
    requests: 0,
    completed: 0,
    aborted: 0,
    crashed: 0,
    failed: 0,
    rejected: 0,
    unauthorized: 0,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
  };
  private readonly endpointCounts: Record<string, number> = {};
  private lastPriority: number | undefined;
  private lastTrace: { traceparent?: string | undefined; tracestate?: string | undefined } = {};
  private idCounter = 0;
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
    this.encode =
      options.tokenizerPath === undefined
        ? (text) => tokenize(text)
        : loadLocalTokenizer(options.tokenizerPath, "tokenizerPath").encode;
    this.currentFaults = faults;
    this.failRemaining = faults.failFirst;
    this.pd =
      options.role === undefined
        ? undefined
        : new PdSide(
            options.role,
            options,
            () => this.options.timeScale * this.currentFaults.slowdown,
          );
    this.ranks = Array.from({ length: dpSize }, (_, rank) => {
      const publisher = kvEventsRanks[rank];
      const kv = new PrefixKvCache({
        capacityTokens: options.kvCapacityTokens,
        blockSize: options.blockSize,
        ...(publisher !== undefined ? { listener: publisher } : {}),
      });
      const engine = new Engine(
        {
          timing: options,
          maxRunning: options.maxRunning,
          maxBatchTokens: options.maxBatchTokens,
          delayFactor: () => this.options.timeScale * this.currentFaults.slowdown,
          firstTokenDelayMs: options.firstTokenDelayMs,
          ...(options.priorityScheduling ? { priorityOrder: priorityOrderOf(options.flavor) } : {}),
        },
        kv,
        clock,
      );
      return { kv, engine, requests: 0 };
    });
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

  stats(): SimStats {
    const c = this.counters;
    return {
      id: this.assignedId,
      requests: c.requests,
      inFlight: this.sum((r) => r.engine.running + r.engine.waiting) + this.hanging.size,
      running: this.sum((r) => r.engine.running),
      waiting: this.sum((r) => r.engine.waiting),
      hanging: this.hanging.size,
      completed: c.completed,
      aborted: c.aborted,
      crashed: c.crashed,
      failed: c.failed,
      rejected: c.rejected,
      unauthorized: c.unauthorized,
      promptTokens: c.promptTokens,
      cachedTokens: c.cachedTokens,
      completionTokens: c.completionTokens,
      kvUsage: this.sum((r) => r.kv.activeUsage) / this.ranks.length,
      kvEvictions: this.sum((r) => r.kv.evictions),
      endpoints: { ...this.endpointCounts },
      lastTraceparent: this.lastTrace.traceparent,
      lastTracestate: this.lastTrace.tracestate,
      lastPriority: this.lastPriority,
    };
  }

  cachedPrefixTokens(promptTokens: readonly number[], rank?: number): number {
    if (rank !== undefined) return this.ranks[rank]?.kv.cachedPrefixTokens(promptTokens) ?? 0;
    return Math.max(...this.ranks.map((r) => r.kv.cachedPrefixTokens(promptTokens)));
  }

  private sum(of: (rank: SimRank) => number): number {
    let total = 0;
    for (const rank of this.ranks) total += of(rank);
    return total;
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
    const known = INFERENCE_PATHS[path] !== undefined || OTHER_PATHS.has(path);
    const key = known ? path : "unmatched";
    this.endpointCounts[key] = (this.endpointCounts[key] ?? 0) + 1;

    if (!this.authorized(req, path)) {
      return sendJson(res, 401, { error: "Unauthorized" });
    }
    const endpoint = INFERENCE_PATHS[path];
    if (endpoint !== undefined) {
      if (req.method !== "POST") return methodNotAllowed(res);
      return this.inference(endpoint, req, res);
    }
    if (path === "/_sim/faults" && req.method === "POST") return this.postFaults(req, res);
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
        return sendJson(res, 200, this.models());
      case "/get_model_info":
        // SGLang's native endpoints: a vLLM server answers 404 there.
        if (this.flavor === "vllm") return sendJson(res, 404, { detail: "Not Found" });
        return sendJson(res, 200, {
          model_path: this.options.model,
          tokenizer_path: this.options.model,
          is_generation: true,
        });
      case "/get_server_info":
        if (this.flavor === "vllm") return sendJson(res, 404, { detail: "Not Found" });
        return sendJson(res, 200, this.serverInfo());
      case "/version":
        return sendJson(res, 200, { version: SIM_VERSION });
      case "/metrics":
        return this.metrics(res);
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
    const body = await this.readJson(req, res);
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

    let job: ReturnType<typeof parseJob>;
    try {
      job = parseJob(endpoint, body, {
        defaultMaxTokens: this.options.defaultMaxTokens,
        maxModelLen: this.options.maxModelLen,
        model: this.options.model,
        tokenize: this.encode,
      });
      const b = body as Record<string, unknown>;
      this.lastPriority = typeof b.priority === "number" ? b.priority : undefined;
      job.priority = this.lastPriority ?? 0;
      const requested = typeof b.model === "string" && b.model.length > 0 ? b.model : undefined;
      const choice = chooseModel(this.served, this.flavor, requested, b.lora_path);
      job.model = choice.name;
      const adapter = choice.adapter;
      if (adapter !== undefined) job.prompts = job.prompts.map((p) => saltForAdapter(p, adapter));
      const perItem = choice.perItem;
      if (perItem !== undefined) {
        if (perItem.length !== job.prompts.length)
          throw new BadRequest("lora_path must have one entry per prompt", "lora_path");
        job.prompts = job.prompts.map((p, i) => {
          const itemAdapter = perItem[i];
          return itemAdapter === undefined ? p : saltForAdapter(p, itemAdapter);
        });
      }
    } catch (err) {
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
    serveJob(
      {
        engine: rank.engine,
        counters: this.counters,
        embeddingDim: this.options.embeddingDim,
        crashAfterChunks: f.crashMidStream,
        nextId: (prefix) => `${prefix}${this.assignedId}-${++this.idCounter}`,
        ...hooks,
      },
      job,
      res,
    );
  }

  /** The parsed JSON body, or undefined once an error (or nothing, if the client left) was sent. */
  private async readJson(req: IncomingMessage, res: ServerResponse): Promise<unknown> {
    let raw: Buffer;
    try {
      raw = await readBody(req, this.options.bodyLimitBytes);
    } catch (err) {
      if (err instanceof BodyTooLarge) {
        this.counters.rejected++;
        res.setHeader("connection", "close");
        sendJson(
          res,
          413,
          errorBody(413, `request body exceeds ${this.options.bodyLimitBytes} bytes`),
        );
      } else {
        this.counters.aborted++;
      }
      return undefined;
    }
    try {
      return JSON.parse(raw.toString("utf8")) as unknown;
    } catch {
      this.counters.rejected++;
      sendJson(res, 400, errorBody(400, "request body is not valid JSON"));
      return undefined;
    }
  }

  /**
   * vLLM's POST /tokenize (vllm/entrypoints/openai/protocol.py TokenizeCompletionRequest and
   * TokenizeChatRequest; SGLang's /tokenize takes the `prompt` form): `{prompt}` or `{messages}`
   * in, `{count, max_model_len, tokens}` out, with the same template the engine prefills.
   */
  private async tokenizeEndpoint(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.readJson(req, res);
    if (body === undefined) return;
    const tokens = this.tokenizeBody(body);
    if (tokens === undefined) {
      this.counters.rejected++;
      return sendJson(res, 400, errorBody(400, "tokenize needs prompt or messages"));
    }
    sendJson(res, 200, { count: tokens.length, max_model_len: this.options.maxModelLen, tokens });
  }

  tokenizeBody(json: unknown): number[] | undefined {
    const body = json as Record<string, unknown> | null;
    let text: string;
    // vLLM's defaults: special tokens for a prompt, none for a rendered chat (protocol.ts).
    let addSpecialTokens: boolean;
    if (typeof body?.prompt === "string") {
      text = body.prompt;
      addSpecialTokens = body.add_special_tokens !== false;
    } else if (Array.isArray(body?.messages)) {
      addSpecialTokens = body.add_special_tokens === true;
      const messages = body.messages.map((m: unknown) => {
        const { role, content } = (m ?? {}) as Record<string, unknown>;
        return { role: String(role), content: typeof content === "string" ? content : "" };
      });
      text = renderChat(messages, body.add_generation_prompt !== false);
    } else {
      return undefined;
    }
    return this.encode(text, addSpecialTokens);
  }

  private async postFaults(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await this.readJson(req, res);
    if (body === undefined) return;
    try {
      this.setFaults(body as Partial<SimFaults>);
    } catch (err) {
      return sendJson(res, 400, errorBody(400, (err as Error).message));
    }
    sendJson(res, 200, this.faults());
  }

  private models() {
    return modelList(
      this.served,
      this.flavor,
      this.options.maxModelLen,
      Math.floor(Date.now() / 1000),
    );
  }

  private get served() {
    return {
      names: [this.options.model, ...this.options.modelAliases],
      adapters: this.options.loraAdapters,
    };
  }

  private serverInfo() {
    const o = this.options;
    return {
      model_path: o.model,
      served_model_name: o.model,
      context_length: o.maxModelLen,
      max_total_num_tokens: this.kv.totalBlocks * this.kv.blockSize,
      max_req_input_len: o.maxModelLen - 1,
      dp_size: this.ranks.length,
      max_running_requests: o.maxRunning,
      chunked_prefill_size: o.maxBatchTokens,
      page_size: o.blockSize,
      version: SIM_VERSION,
      simulator: {
        id: this.assignedId,
        flavor: o.flavor,
        timeScale: o.timeScale,
        prefillTokensPerSec: o.prefillTokensPerSec,
        stepFloorMs: o.stepFloorMs,
        decodePerSeqMs: o.decodePerSeqMs,
        kvReadMsPer1kTokens: o.kvReadMsPer1kTokens,
        defaultMaxTokens: o.defaultMaxTokens,
      },
    };
  }

  private metrics(res: ServerResponse): void {
    const s = this.stats();
    const whole = {
      model: this.options.model,
      running: s.running,
      waiting: s.waiting,
      kvUsage: s.kvUsage,
      kvUsedTokens: (this.kv.pinnedBlocks + this.kv.reservedBlocks) * this.kv.blockSize,
      promptTokens: s.promptTokens,
      cachedTokens: s.cachedTokens,
      generationTokens: s.completionTokens,
      completedRequests: s.completed,
      kvBlocks: this.kv.totalBlocks,
      blockSize: this.kv.blockSize,
    };
    // With data parallelism: a series per rank, as both engines report them (the counters are
    // kept for the whole engine and shown on rank 0, so that the sums stay right).
    const none = { promptTokens: 0, cachedTokens: 0, generationTokens: 0, completedRequests: 0 };
    const ranks = this.ranks.map(({ kv, engine }, i) => ({
      ...whole,
      ...(i > 0 ? none : {}),
      running: engine.running,
      waiting: engine.waiting,
      kvUsage: kv.activeUsage,
      kvUsedTokens: (kv.pinnedBlocks + kv.reservedBlocks) * kv.blockSize,
      kvBlocks: kv.totalBlocks,
    }));
    const text = renderMetrics(this.flavor, whole, ranks);
    res.writeHead(200, {
      "content-type": METRICS_CONTENT_TYPE,
      "content-length": Buffer.byteLength(text),
    });
    res.end(text);
  }
}

function methodNotAllowed(res: ServerResponse): void {
  sendJson(res, 405, { detail: "Method Not Allowed" });
}

/** Read a request body up to `limit` bytes; rejects with BodyTooLarge beyond it. */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        req.off("data", onData);
        req.resume(); // drain and discard the rest
        reject(new BodyTooLarge());
        return;
      }
      chunks.push(chunk);
    };
    req.on("data", onData);
    req.once("end", () => resolve(Buffer.concat(chunks)));
    req.once("error", reject);
    req.once("close", () => {
      if (!req.complete) reject(new Error("client closed the connection while sending the body"));
    });
  });
}

function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(",") : value;
}
