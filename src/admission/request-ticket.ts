import type { IncomingHttpHeaders } from "node:http";
import type { Cancel } from "../proxy/cancel.js";
import { admitted, type ModelRoutingMode, planModel } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import {
  type IdentityOptions,
  identify,
  type RequestIdentity,
  type TenantTable,
} from "./identity.js";
import type { AdmissionTicket } from "./step.js";

/** Characters per token when counting a request's work before any worker is chosen. */
const CHARS_PER_TOKEN = 4;
/** The output counted for a request that does not say how much it wants. */
export const DEFAULT_OUTPUT_TOKENS = 256;

/**
 * What admission knows of a received request: plain facts intake already read. A ticket made
 * from them works out its parts with admission's and workers' own code, so a request waiting
 * here never runs intake's or the routes' code again (docs/architecture.md: the request's path
 * never returns to a folder it has left).
 */
export interface AdmissionFacts {
  readonly headers: IncomingHttpHeaders;
  /** The model the client named. */
  readonly model: string | undefined;
  /** The route's label (chat, generate...): some engines do not serve some (served-models.ts). */
  readonly endpoint?: string;
  /** Characters of its routing text; undefined for a request without a body (GET info routes). */
  readonly textChars: number | undefined;
  /** The output it asks for (max_tokens and its spellings), when it says. */
  readonly maxTokens: number | undefined;
  /** The longest it may wait, ms. */
  readonly timeoutMs: number;
}

/** What the ticket reads besides the request: the fleet and who is who. */
export interface TicketSources {
  readonly fleet: { list(): readonly Worker[]; candidates(): readonly Worker[] };
  readonly modelRouting: ModelRoutingMode;
  readonly identity: IdentityOptions;
  readonly tenants: TenantTable;
}

/**
 * A ticket whose parts are worked out only when asked (a request that goes at once never has
 * its tenant read or its cost counted).
 */
export function requestTicket(
  facts: AdmissionFacts,
  sources: TicketSources,
  signal: Cancel,
): AdmissionTicket {
  // Read once: the quota step, the queue and --engine-priority each ask, and reading it hashes a
  // bearer key and touches the tenant table.
  let identity: RequestIdentity | undefined;
  return {
    signal,
    roomKey: `${facts.model ?? ""}\u0000${facts.endpoint ?? ""}`,
    identity: () => {
      identity ??= identify(facts.headers, sources.identity, sources.tenants);
      return identity;
    },
    candidates: () => {
      // The model's plan against the fleet as it is now (a worker may have joined meanwhile).
      const plan = planModel(
        sources.fleet.list(),
        facts.model,
        sources.modelRouting,
        facts.endpoint,
      );
      return plan.route === "not_found" ? [] : admitted(sources.fleet.candidates(), plan);
    },
    cost: () => requestCost(facts.textChars, facts.maxTokens),
    promptChars: () => facts.textChars,
    maxTokens: () => facts.maxTokens,
    timeoutMs: () => facts.timeoutMs,
  };
}

/** The request's work in tokens: its prompt (estimated from characters) and the output it asks. */
export function requestCost(textChars: number | undefined, maxTokens: number | undefined): number {
  if (textChars === undefined) return 1;
  return Math.ceil(textChars / CHARS_PER_TOKEN) + (maxTokens ?? DEFAULT_OUTPUT_TOKENS);
}
