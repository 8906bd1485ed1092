import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import { type IdentityOptions, TenantTable } from "../admission/identity.js";
import { RouterError } from "../errors.js";
import { saltedKey } from "../index/salted-key.js";
import { MAX_BODY_NESTING } from "../proxy/json-depth.js";
import type { RoutingRequest } from "../proxy/routing-request.js";
import type { ResponseHolders } from "../workers/response-holders.js";
import {
  adapterNamed,
  holdingAdapter,
  indexKey,
  type ModelPlan,
  type ModelRoutingMode,
  pinnedTo,
  planModel,
  type ServingWorker,
} from "../workers/served-models.js";
import { BodyBudget, type BodyLease } from "./body-budget.js";
import {
  type BodySummary,
  type PairProtocolName,
  parseJsonObject,
  summarizeParsed,
} from "./body-summary.js";
import { type CacheIsolation, saltedBody, saltedPairView, tenantSalt } from "./cache-salt.js";
import { checkContentType } from "./content-type.js";
import { LargeBodyGate, type LargeBodyLimits } from "./large-body-gate.js";
import type { ParsePool } from "./parse-pool.js";
import { type BodyReadLimits, type BoundedFields, readBody } from "./read-body.js";
import { type BoundedName, type Endpoint, MAX_NAME_CHARS, nameTooLong } from "./routing-text.js";
import { type SessionSource, sessionKey } from "./session-key.js";

export interface IntakeOptions {
  /** --max-payload-size, the body read timeouts and --body-min-rate-bytes. */
  body: BodyReadLimits;
  /**
   * --large-body-bytes, --max-large-body-reads, --large-body-wait-secs: large bodies are read a
   * few at a time (undefined, or 0 reads: no gate).
   */
  largeBodies?: LargeBodyLimits;
  /** --parse-offload-bytes: bodies this large are parsed by the parse pool, when there is one. */
  parseOffloadBytes: number;
  /** --max-routing-text-chars */
  maxRoutingTextChars: number;
  /** --kv-events: the precise index needs the request as the engine's tokenizer takes it. */
  withTokenizeInput: boolean;
  /** --session-affinity and --session-header */
  sessionAffinity: SessionSource;
  sessionHeader: string;
  /** --model-routing */
  modelRouting: ModelRoutingMode;
  /**
   * --cache-isolation tenant: each tenant's requests carry its salt to the engine and are indexed
   * under it, so no tenant's prompt is ever served from, or routed by, another's cache.
   */
  cacheIsolation?: CacheIsolation;
  /** --tenant-header and --priority-header (admission/identity.ts); default x-tenant-id, x-priority. */
  identity?: IdentityOptions;
  /**
   * Responses API: the worker that produced each response relayed (routes/inference.ts records
   * them); a request with previous_response_id goes there. Undefined: no such routing.
   */
  responseHolders?: ResponseHolders;
  /**
   * Prefill/decode pairs in this protocol: the body's parse also works out what the pair needs of
   * it (RoutingRequest.pair), so the pair never parses it again. Undefined: no pairs.
   */
  pairs?: PairProtocolName | undefined;
}

const DEFAULT_IDENTITY: IdentityOptions = {
  tenantHeader: "x-tenant-id",
  priorityHeader: "x-priority",
};

/**
 * Fields whose strings are bounded as the body arrives: a name of megabytes (SGLang's lora_path,
 * a model) is refused at its first chunks, not kept, handed to a parser and parsed whole.
 */
const BOUNDED_FIELDS: BoundedFields = {
  chars: new Map(Object.entries(MAX_NAME_CHARS)),
  refuse: (field, chars) => nameTooLong(field as BoundedName, chars, false),
};

/** A request whose body has been read and summarized, before it waits for admission. */
export interface ReceivedRequest {
  readonly endpoint: Endpoint | "models";
  readonly body: Buffer | undefined;
  readonly summary: BodySummary | undefined;
  readonly session: string | undefined;
  /** The request's headers: its tenant and priority are read from them only when needed. */
  readonly headers: IncomingHttpHeaders;
  /** Its tenant's cache salt (--cache-isolation tenant), already in the body. */
  readonly cacheSalt?: string | undefined;
}

/**
 * The receive stage's result: the request's facts (admission's ticket is made of them), its
 * RoutingRequest against the fleet as it is now, and the lease its body holds in the router-wide
 * budget until the request ends (a retry sends the body again).
 */
export interface OpenedRequest {
  readonly received: ReceivedRequest;
  readonly routing: RoutingRequest;
  readonly lease: BodyLease;
}

/**
 * Turns an HTTP request into a RoutingRequest, once per request, for the data plane and POST
 * /debug/route alike. Two steps, because the request may wait for admission in between:
 * - receive: the body read within its bounds (size, time, the router-wide budget through the
 *   lease), one JSON parse (off the event loop when large, --parse-workers) into the routing
 *   text, model, adapter, stream and tokenize input, and the session key;
 * - route: what depends on the fleet as it is when the request goes (the model's plan and index
 *   key), so a worker that joined or listed its models during the wait counts.
 */
export class Intake {
  /** The body's read limits, the same for every request: made once, not per request. */
  private readonly bodyLimits: BodyReadLimits;
  /** Large bodies read a few at a time; undefined = no such bound. */
  readonly largeBodyGate: LargeBodyGate | undefined;

  constructor(
    private readonly options: IntakeOptions,
    /** The registered workers (the model's plan and index key read their served models). */
    private readonly fleet: { list(): readonly ServingWorker[] },
    /** Child processes for large bodies (--parse-workers); undefined = every body parsed in line. */
    private readonly parsePool?: ParsePool,
    /** The tenants tracked at once (--max-tenants), shared with admission's metrics. */
    readonly tenants: TenantTable = new TenantTable(64),
    /** The router-wide budget of buffered bodies (--max-body-buffer-bytes) open() leases from. */
    private readonly budget?: BodyBudget,
  ) {
    // Every body taken here is JSON: its nesting is bounded as it arrives, before any parse.
    this.bodyLimits = {
      maxNesting: MAX_BODY_NESTING,
      boundedFields: BOUNDED_FIELDS,
      ...options.body,
    };
    const large = options.largeBodies;
    this.largeBodyGate =
      large !== undefined && large.reads > 0 ? new LargeBodyGate(large) : undefined;
  }

  /** Reads and summarizes the body of an inference POST (nothing for the GET info routes). */
  async receive(
    incoming: IncomingMessage,
    endpoint: Endpoint | "models",
    lease: BodyLease,
  ): Promise<ReceivedRequest> {
    if (endpoint === "models") {
      return {
        endpoint,
        body: undefined,
        summary: undefined,
        session: undefined,
        headers: incoming.headers,
      };
    }
    checkContentType(incoming.headers["content-type"]);
    const body = await readBody(incoming, this.bodyLimits, lease, this.largeBodyGate);
    const offloaded = this.offloaded(endpoint, body);
    return this.received(incoming, endpoint, body, offloaded && (await offloaded));
  }

  /**
   * The parse of a body large enough for the parse pool (--parse-offload-bytes), off the event
   * loop; undefined when the body is parsed in line (received() does it).
   */
  private offloaded(endpoint: Endpoint, body: Buffer): Promise<BodySummary> | undefined {
    const { options, parsePool } = this;
    if (parsePool === undefined || body.byteLength < options.parseOffloadBytes) return undefined;
    return parsePool.summarize(
      endpoint,
      body,
      options.maxRoutingTextChars,
      options.withTokenizeInput,
      options.pairs,
    );
  }

  /** The received request of a body read whole: parsed here unless the parse pool did it. */
  private received(
    incoming: IncomingMessage,
    endpoint: Endpoint,
    body: Buffer,
    offloaded: BodySummary | undefined,
  ): ReceivedRequest {
    const { options } = this;
    const summary =
      offloaded ??
      summarizeParsed(
        endpoint,
        parseJsonObject(body),
        options.maxRoutingTextChars,
        options.withTokenizeInput,
        options.pairs,
      );
    const session = this.session(incoming.headers, summary.user);
    if (options.cacheIsolation === "tenant") {
      const cacheSalt = tenantSalt(incoming.headers, this.identity.tenantHeader);
      const salted = saltedBody(body, endpoint, cacheSalt);
      if (salted !== undefined) {
        const pair = summary.pair;
        return {
          endpoint,
          body: salted,
          summary:
            pair === undefined
              ? summary
              : { ...summary, pair: saltedPairView(pair, endpoint, cacheSalt) },
          session,
          headers: incoming.headers,
          cacheSalt,
        };
      }
    }
    return { endpoint, body, summary, session, headers: incoming.headers };
  }

  /** --tenant-header and --priority-header: whom admission's ticket reads the identity from. */
  get identity(): IdentityOptions {
    return this.options.identity ?? DEFAULT_IDENTITY;
  }

  /** --model-routing: how admission's ticket and route() plan the model. */
  get modelRouting(): ModelRoutingMode {
    return this.options.modelRouting;
  }

  /** The RoutingRequest of a received request, against the fleet as it is now. */
  route(received: ReceivedRequest): RoutingRequest {
    const { summary } = received;
    const workers = this.fleet.list();
    const requested = summary?.model;
    const adapter = summary?.adapter;
    const modelPlan = planModel(workers, requested, this.options.modelRouting, received.endpoint);
    // SGLang's adapter (lora_path, <base>:<adapter>) narrows the workers to those holding it.
    const named = adapterNamed(requested, adapter);
    const byModel = named === requested ? modelPlan : holdingAdapter(modelPlan, workers, named);
    return {
      endpoint: received.endpoint,
      body: received.body,
      pair: summary?.pair,
      text: summary?.text ?? "",
      // What the index sees: the text, under the model's own key when its KV is kept apart, and
      // under the tenant's salt when tenants' caches are (the engines key theirs the same way).
      model: saltedKey(indexKey(workers, requested, adapter), received.cacheSalt),
      requested,
      adapter,
      session: received.session,
      headers: received.headers,
      tokenizeInput: summary?.tokenizeInput,
      stream: summary?.stream ?? false,
      answerHasUsage: summary?.answerHasUsage,
      usageDescribesText: summary?.usageDescribesText ?? false,
      plan: this.heldBy(summary?.previousResponseId, byModel, workers),
    };
  }

  /**
   * A request continuing a stored response goes to the worker that produced it. When that worker
   * has left, the response left with it: 404, as the engine answers an id it does not hold
   * (vllm/entrypoints/openai/responses/serving.py `_make_not_found_error`). An id this router
   * does not know (never relayed here, forgotten, or expired) is routed like any request.
   */
  private heldBy(id: string | undefined, plan: ModelPlan, workers: readonly ServingWorker[]) {
    const holders = this.options.responseHolders;
    if (id === undefined || holders === undefined) return plan;
    const holder = holders.holder(id);
    if (holder === undefined) return plan;
    if (!workers.some((w) => w.id === holder)) {
      throw new RouterError("response_not_found", `Response with id '${id}' not found.`);
    }
    return pinnedTo(plan, holder, `does not hold response '${id}' (previous_response_id)`);
  }

  /**
   * The pipeline's receive stage in one call: the body's lease (from the budget, for the client's
   * address), the body received, and its RoutingRequest as the fleet is now. A request that then
   * waits for admission is routed again (route) when it goes; one that does not goes as routed
   * here. The lease is given back here when receiving fails, else by the caller when the request ends.
   */
  async open(incoming: IncomingMessage, endpoint: Endpoint): Promise<OpenedRequest> {
    const lease = (this.budget ?? UNBOUNDED).lease(incoming.socket.remoteAddress);
    try {
      // receive()'s steps in this one async frame, not a second one awaited (every request).
      checkContentType(incoming.headers["content-type"]);
      const body = await readBody(incoming, this.bodyLimits, lease, this.largeBodyGate);
      const offloaded = this.offloaded(endpoint, body);
      const received = this.received(incoming, endpoint, body, offloaded && (await offloaded));
      return { received, routing: this.route(received), lease };
    } catch (err) {
      lease.release();
      throw err;
    }
  }

  /** Both steps at once, for a request that does not wait for admission (POST /debug/route). */
  async take(
    incoming: IncomingMessage,
    endpoint: Endpoint,
    lease: BodyLease,
  ): Promise<RoutingRequest> {
    return this.route(await this.receive(incoming, endpoint, lease));
  }

  private session(headers: IncomingHttpHeaders, user: string | undefined): string | undefined {
    const { sessionAffinity, sessionHeader } = this.options;
    return sessionKey(sessionAffinity, sessionHeader, headers, user);
  }
}

/** An intake built without a budget (tests): no bound. */
const UNBOUNDED = new BodyBudget(0);
