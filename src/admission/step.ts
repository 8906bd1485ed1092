import type { Cancel } from "../proxy/cancel.js";
import type { SaturationView } from "../workers/saturation.js";
import type { RequestIdentity } from "./identity.js";

/**
 * What an admission step knows of a request. The parts a step rarely needs are functions, so the
 * request that passes at once pays for none of them.
 */
export interface AdmissionTicket {
  /** Tenant and priority (intake/intake.ts identify; bounded). */
  identity(): RequestIdentity;
  /** The workers that could take it now (the model's plan over the available workers). */
  candidates(): readonly SaturationView[];
  /** Its work in tokens: prompt plus the output it asks for (what fairness counts). */
  cost(): number;
  /** Characters of its prompt (routing text); undefined for a request without a body (GET info). */
  promptChars(): number | undefined;
  /** The output it asks for (max_tokens and its spellings), when it says. */
  maxTokens(): number | undefined;
  /** The longest it may wait, ms (--queue-timeout-secs, shortened by the request's header). */
  timeoutMs(): number;
  /** Aborted when the client goes away. */
  readonly signal: Cancel;
  /**
   * Tickets with the same key have the same candidates (the model and route they ask for), so
   * the queue judges one of a tenant's waiting requests of one priority per turn for all of them;
   * absent: each is judged alone.
   */
  readonly roomKey?: string;
}

/**
 * How an admitted request ended, as far as a step cares (proxy/forward.ts's ForwardOutcome is
 * one): a quota reconciles its estimate with the engine's reported usage.
 */
export interface RequestEnd {
  readonly status: number;
  /** The worker's status when the client got another (a client gone mid-answer: 499). */
  readonly upstreamStatus?: number | undefined;
  /** The engine's token counts, when its answer reported them (proxy/usage-tap.ts). */
  readonly usage?:
    | { readonly promptTokens: number; readonly completionTokens?: number | undefined }
    | undefined;
}

/**
 * Called once when the admitted request ends (answered, failed, client gone), with how it ended
 * when it was forwarded (none when it never reached a worker).
 */
export type AdmissionRelease = (end?: RequestEnd) => void;

/**
 * One step of admission: it lets the request go on (at once or after a wait) and is told when it
 * ends, or refuses it with a RouterError (429 with Retry-After, ...). The queue is one step; a
 * per-tenant quota (issue 24 item 4: tokens per minute, concurrent requests, shared through
 * Redis) is meant to be another, placed before the queue so that a tenant over its quota never
 * takes a queue place.
 */
export interface AdmissionStep {
  readonly name: string;
  enter(ticket: AdmissionTicket): AdmissionRelease | Promise<AdmissionRelease>;
  /**
   * What the step would do with the request now, for /debug/route: read only, nothing charged
   * or held. Undefined when the step has nothing to say about this request.
   */
  explain?(ticket: AdmissionTicket, now: number): StepExplanation | undefined;
}

/** A step's part of /debug/route's admission answer (JSON). */
export type StepExplanation = Readonly<Record<string, unknown>>;

/** The steps in order; each one's release runs in reverse order when the request ends. */
export class AdmissionPipeline {
  constructor(private readonly steps: readonly AdmissionStep[]) {}

  admit(ticket: AdmissionTicket): AdmissionRelease | Promise<AdmissionRelease> {
    // One step (the queue alone): its answer as is, so a request with room goes without a promise.
    if (this.steps.length === 1) return (this.steps[0] as AdmissionStep).enter(ticket);
    return this.admitAll(ticket);
  }

  private async admitAll(ticket: AdmissionTicket): Promise<AdmissionRelease> {
    const releases: AdmissionRelease[] = [];
    const releaseAll = (end?: RequestEnd) => {
      for (let i = releases.length - 1; i >= 0; i--) (releases[i] as AdmissionRelease)(end);
    };
    try {
      for (const step of this.steps) releases.push(await step.enter(ticket));
    } catch (err) {
      releaseAll();
      throw err;
    }
    return once(releaseAll);
  }
}

function once(release: AdmissionRelease): AdmissionRelease {
  let done = false;
  return (end) => {
    if (done) return;
    done = true;
    release(end);
  };
}
