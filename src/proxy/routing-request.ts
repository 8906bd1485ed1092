import type { DecisionRequest } from "../scheduling/scheduler.js";
import type { ModelPlan } from "../workers/served-models.js";

/**
 * One request as the router routes it. intake/ builds it once per request from the HTTP request
 * (intake/intake.ts); the forwarder, the decider and POST /debug/route read it and never look at
 * the body again. Defined here, below intake/, because the data plane that consumes it may not
 * import upward (.dependency-cruiser.cjs).
 */
export interface RoutingRequest extends DecisionRequest {
  /** Metric label of the route: chat, completions, generate, embeddings, or models (GET info). */
  readonly endpoint: string;
  /** The body as the client sent it, sent to the worker as is; undefined for the GET routes. */
  readonly body: Buffer | undefined;
  /**
   * What a prefill/decode pair needs of the body (pair.ts PairView), from intake's one parse, in
   * line or in a parse process; undefined without pairs (IntakeOptions.pairs).
   */
  readonly pair?: PairView | undefined;
  /** What the engine will prefill (intake/routing-text.ts); "" when there is nothing. */
  readonly text: string;
  /**
   * The prefix-index key: the model or adapter whose KV is kept apart, undefined for the shared
   * default (workers/served-models.ts indexKey).
   */
  readonly model: string | undefined;
  /** The model the client named. */
  readonly requested: string | undefined;
  /** SGLang's lora_path as an adapter key (intake/routing-text.ts adapterOf). */
  readonly adapter: string | undefined;
  /** Conversation id for session affinity (--session-affinity), when the request carries one. */
  readonly session: string | undefined;
  /** `"stream": true`: the first-byte limit is the streaming one. */
  readonly stream: boolean;
  /** The answer can carry the engine's token counts (intake/body-summary.ts); undefined: it can. */
  readonly answerHasUsage?: boolean | undefined;
  /** One prompt, whole in `text`: the engine's usage describes it (intake/body-summary.ts). */
  readonly usageDescribesText: boolean;
  /** Which workers the requested model admits (workers/served-models.ts planModel). */
  readonly plan: ModelPlan;
}

/**
 * What a prefill/decode pair needs of a request's body, worked out where intake parsed it (in
 * line, or in a parse process for a large body: disaggregation/pd-body.ts pairView), so the pair
 * never parses the body again on the event loop. Plain data: it crosses the parse process's
 * channel.
 */
export interface PairView {
  /** Why the pair refuses the body (400, naming the field); nothing else is set then. */
  readonly refusal?: string | undefined;
  /** SGLang's hand-off fields are arrays of this many items (a batch); undefined for one. */
  readonly batch?: number | undefined;
  /**
   * The body the router's fields are spliced into, when the client's own bytes cannot take them:
   * they carry a field the router replaces (serialized again without it). Undefined: the
   * client's bytes.
   */
  readonly base?: Uint8Array | undefined;
  /** vLLM: the prefill side's body. */
  readonly prefill?: Uint8Array | undefined;
}
