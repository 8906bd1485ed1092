import type { QuotaRefusalReason } from "../admission/admission-metrics.js";
import type { RequestIdentity } from "../admission/identity.js";
import { DEFAULT_OUTPUT_TOKENS } from "../admission/request-ticket.js";
import type {
  AdmissionRelease,
  AdmissionStep,
  AdmissionTicket,
  RequestEnd,
  StepExplanation,
} from "../admission/step.js";
import { RouterError, retryAfterSecs } from "../errors.js";
import { explainQuota } from "./quota-explain.js";
import { limitsFor, type QuotaLimits, type QuotaTable } from "./quota-file.js";
import type { QuotaLease, QuotaStore, QuotaUsage, QuotaVerdict } from "./quota-store.js";

export interface QuotaStepOptions {
  /** The fleet's learned characters per prompt token (the mean of the workers' estimates). */
  charsPerToken(): number;
  /** Told of every refusal (the admission metrics count it per tenant and priority). */
  refused(identity: RequestIdentity, reason: QuotaRefusalReason): void;
}

/** A request no quota applies to: nothing to give back. */
const NOTHING: AdmissionRelease = () => {};

/**
 * Per-tenant quotas (--tenant-quota, issue 24 item 4): an admission step before the queue, so a
 * tenant over its quota never takes a queue place. A request is charged its prompt's tokens,
 * estimated from its characters, when it is admitted; when it ends, the estimate is replaced by
 * what the engine reported (prompt and generated tokens), or, when it reported nothing, by the
 * estimate plus the output the request asked for. A request that was not served is refunded.
 */
export class QuotaStep implements AdmissionStep {
  readonly name = "quota";
  private sequence = 0;

  constructor(
    private table: QuotaTable,
    private readonly store: QuotaStore,
    private readonly options: QuotaStepOptions,
    /** Makes lease ids unique across replicas (the Redis store keys leases by them). */
    private readonly leasePrefix = "",
  ) {}

  /** A reloaded file: new requests meet its limits; those under way end as they began. */
  setTable(table: QuotaTable): void {
    this.table = table;
  }

  enter(ticket: AdmissionTicket): AdmissionRelease | Promise<AdmissionRelease> {
    const charged = this.quotaOf(ticket);
    if (charged === undefined) return NOTHING;
    const { identity, limits, estimate } = charged;
    this.sequence += 1;
    const verdict = this.store.acquire(
      identity.tenant,
      limits,
      estimate,
      `${this.leasePrefix}${this.sequence}`,
    );
    const decide = (v: QuotaVerdict) => this.decide(v, identity, estimate, ticket.maxTokens());
    return verdict instanceof Promise ? verdict.then(decide) : decide(verdict);
  }

  /** /debug/route: whether the request's tenant would be refused now; nothing is charged. */
  explain(ticket: AdmissionTicket, now: number): StepExplanation | undefined {
    const charged = this.quotaOf(ticket);
    if (charged === undefined) return undefined;
    const { tenant } = charged.identity;
    let usage: QuotaUsage | undefined;
    for (const [name, seen] of this.store.usage()) if (name === tenant) usage = seen;
    return { ...explainQuota(tenant, charged.limits, usage, charged.estimate, now) };
  }

  /**
   * The request's tenant, its limits and the prompt's token estimate; undefined when no quota
   * applies (model and server info (GET) cost nothing, a tenant without limits is not counted).
   */
  private quotaOf(
    ticket: AdmissionTicket,
  ): { identity: RequestIdentity; limits: QuotaLimits; estimate: number } | undefined {
    const chars = ticket.promptChars();
    if (chars === undefined) return undefined;
    const identity = ticket.identity();
    const limits = limitsFor(this.table, identity.tenant);
    if (limits === undefined) return undefined;
    if (limits.tokensPerMinute === undefined && limits.concurrentRequests === undefined)
      return undefined;
    return { identity, limits, estimate: Math.ceil(chars / this.options.charsPerToken()) };
  }

  private decide(
    verdict: QuotaVerdict,
    identity: RequestIdentity,
    estimate: number,
    maxTokens: number | undefined,
  ): AdmissionRelease {
    if (!verdict.admitted) {
      this.options.refused(identity, verdict.reason);
      const secs = retryAfterSecs(verdict.retryAfterMs);
      throw verdict.reason === "quota_tokens"
        ? new RouterError(
            "tenant_quota_exceeded",
            `Tenant "${identity.tenant}" is over its tokens per minute; retry in ${secs} s.`,
            secs,
          )
        : new RouterError(
            "tenant_concurrency_exceeded",
            `Tenant "${identity.tenant}" has its limit of requests under way; retry when one ends.`,
            secs,
          );
    }
    const lease = verdict.lease;
    let settled = false;
    return (end) => {
      if (settled) return;
      settled = true;
      this.settle(lease, estimate, maxTokens, end);
    };
  }

  private settle(
    lease: QuotaLease,
    estimate: number,
    maxTokens: number | undefined,
    end: RequestEnd | undefined,
  ): void {
    const charged = tokensToCharge(estimate, maxTokens, end);
    this.store.release(lease, Math.max(0, estimate - charged), Math.max(0, charged - estimate));
  }
}

/**
 * What a request costs its tenant once it ended: nothing when it was not served (refused by a
 * later step, failed, answered with an error); else the engine's prompt and completion tokens,
 * each replaced, when the engine did not report it, by the estimate (the prompt) or the output
 * the request asked for (max_tokens, or 256 when it did not say).
 */
export function tokensToCharge(
  estimate: number,
  maxTokens: number | undefined,
  end: RequestEnd | undefined,
): number {
  if (end === undefined || !served(end)) return 0;
  const prompt = end.usage?.promptTokens ?? estimate;
  const output = end.usage?.completionTokens ?? maxTokens ?? DEFAULT_OUTPUT_TOKENS;
  return prompt + output;
}

/** A success, or a success the client left before its end (the engine worked for it). */
function served(end: RequestEnd): boolean {
  const status = end.status === 499 ? (end.upstreamStatus ?? 0) : end.status;
  return status >= 200 && status < 300;
}
