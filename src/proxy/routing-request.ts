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
   * The body's JSON object from intake's one parse, kept only when the data plane rewrites the body
   * (prefill/decode pairs: IntakeOptions.keepJson); undefined otherwise, and for a body parsed in
   * a parse worker (its object stays in that thread: copying it back would cost a parse's time
   * on the event loop). Shared, never to be changed.
   */
  readonly json?: Readonly<Record<string, unknown>> | undefined;
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
  /** One prompt, whole in `text`: the engine's usage describes it (intake/body-summary.ts). */
  readonly usageDescribesText: boolean;
  /** Which workers the requested model admits (workers/served-models.ts planModel). */
  readonly plan: ModelPlan;
}
