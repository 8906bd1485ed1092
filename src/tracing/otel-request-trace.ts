/**
 * One request's spans (loaded only with tracing on, by otel-tracing.ts): the request's SERVER
 * span and its children — body read, tokenize, queue wait, decision, each upstream attempt (a
 * CLIENT span whose context is the traceparent the worker gets) — and the first byte as an event.
 */
import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { AccountedDecision } from "../cache-account/request-account.js";
import type {
  AttemptTrace,
  DecisionSpan,
  PhaseName,
  PhaseSpan,
  RequestTrace,
  TracedAttemptEnd,
  TracedOutcome,
  TracedWorker,
} from "./request-trace.js";

/** Writes a span's context into a header carrier (the W3C propagator's inject). */
export type Inject = (span: Span, carrier: Record<string, string | string[]>) => void;

export class OtelRequestTrace implements RequestTrace {
  private ended = false;
  private attempts = 0;
  /** Phase and decision spans not ended yet (at most a few): ended with the request. */
  private readonly open = new Set<Span>();
  /** The request span as its children's parent context: made once, not once per child. */
  private readonly parent: Context;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly injectInto: Inject,
  ) {
    this.parent = trace.setSpan(ROOT_CONTEXT, span);
  }

  private child(name: string, kind: SpanKind = SpanKind.INTERNAL, attributes?: Attributes): Span {
    return this.tracer.startSpan(name, { kind, attributes }, this.parent);
  }

  phase(name: PhaseName): PhaseSpan {
    const span = this.child(name);
    this.open.add(span);
    return { end: () => this.close(span) };
  }

  decision(): DecisionSpan {
    const span = this.child("decision");
    this.open.add(span);
    return {
      end: (policy, decision) => {
        span.setAttributes(decisionAttributes(policy, decision));
        this.close(span);
      },
    };
  }

  private close(span: Span): void {
    if (this.open.delete(span)) span.end();
  }

  attempt(worker: TracedWorker, side?: "prefill" | "decode"): AttemptTrace {
    this.attempts += 1;
    const span = this.child("upstream_attempt", SpanKind.CLIENT, {
      "radixgate.worker": worker.id,
      "url.full": worker.url,
      "radixgate.attempt": this.attempts,
      ...(side !== undefined ? { "radixgate.side": side } : {}),
    });
    const request = this.span;
    let open = true;
    let firstByteSeen = false;
    return {
      inject: (headers) => {
        const out = { ...headers };
        // The client's tracestate belongs to the client's trace: the propagator writes it back
        // only when the span continues that trace, never beside a traceparent of a new one.
        delete out.tracestate;
        this.injectInto(span, out);
        return out;
      },
      status: (code) => {
        span.setAttribute("http.response.status_code", code);
        if (code >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
      },
      // Called for every chunk on some paths (a PD prefill answer drained): recorded once.
      firstByte: () => {
        if (!open || firstByteSeen) return;
        firstByteSeen = true;
        span.addEvent("first_byte");
        request.addEvent("first_byte", {
          "radixgate.worker": worker.id,
          ...(side !== undefined ? { "radixgate.side": side } : {}),
        });
      },
      end: (outcome: TracedAttemptEnd) => {
        if (!open) return;
        open = false;
        if (outcome.kind === "answered") {
          span.setAttribute("http.response.status_code", outcome.status);
          if (outcome.status >= 400) span.setStatus({ code: SpanStatusCode.ERROR });
        } else if (outcome.kind === "failed") {
          span.setStatus({ code: SpanStatusCode.ERROR, message: "upstream attempt failed" });
        }
        span.end();
      },
    };
  }

  end(outcome: TracedOutcome): void {
    if (this.ended) return;
    this.ended = true;
    for (const child of this.open) child.end();
    this.open.clear();
    const span = this.span;
    span.setAttributes({
      "http.response.status_code": outcome.status,
      "radixgate.attempts": outcome.attempts,
    });
    if (outcome.worker !== undefined) span.setAttribute("radixgate.worker", outcome.worker.id);
    if (outcome.prefillWorker !== undefined)
      span.setAttribute("radixgate.prefill_worker", outcome.prefillWorker.id);
    if (outcome.ttfbMs !== undefined) span.setAttribute("radixgate.ttfb_ms", outcome.ttfbMs);
    if (outcome.error !== undefined) span.setAttribute("error.type", outcome.error);
    const account = outcome.account;
    if (account !== undefined) {
      // The request's cache account (cache-account/request-account.ts), in tokens.
      span.setAttributes({
        "radixgate.cache.prompt_tokens": account.promptTokens,
        "radixgate.cache.available_tokens": account.availableTokens,
        "radixgate.cache.chosen_tokens": account.chosenTokens,
        "radixgate.cache.cold_tokens": account.coldTokens,
        "radixgate.cache.routing_loss_tokens": account.routingLossTokens,
        "radixgate.cache.index_loss_tokens": account.indexLossTokens,
      });
      if (account.reportedTokens !== undefined)
        span.setAttribute("radixgate.cache.reported_tokens", account.reportedTokens);
      if (account.runnerUpId !== undefined)
        span.setAttribute("radixgate.cache.runner_up", account.runnerUpId);
      if (account.reason !== null) span.setAttribute("radixgate.cache.loss_reason", account.reason);
    }
    // A server span is an error for the server's own failures only (5xx), not the client's (4xx).
    if (outcome.status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end();
  }
}

/** The decision's scores: the chosen worker's match, the best holder's, the runner-up's. */
function decisionAttributes(policy: string, d: AccountedDecision | undefined): Attributes {
  if (d === undefined) return { "radixgate.policy": policy, "radixgate.decision": "none" };
  const attributes: Attributes = {
    "radixgate.policy": policy,
    "radixgate.worker": d.worker.id,
    "radixgate.branch": d.branch,
    "radixgate.held_chars": d.heldBefore,
    "radixgate.available_chars": d.available,
  };
  if (d.matchRate !== null) attributes["radixgate.match_rate"] = d.matchRate;
  if (d.index !== null) attributes["radixgate.index"] = d.index;
  if (d.runnerUp !== undefined) {
    attributes["radixgate.runner_up"] = d.runnerUp.id;
    attributes["radixgate.runner_up_chars"] = d.runnerUpHeld;
  }
  if (d.lossReason !== null) attributes["radixgate.loss_reason"] = d.lossReason;
  return attributes;
}
