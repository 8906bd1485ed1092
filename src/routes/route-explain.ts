import type { HttpBindings } from "@hono/node-server";
import type { Hono } from "hono";
import type { Endpoint } from "../intake/routing-text.js";
import { Cancel } from "../proxy/cancel.js";
import type { RoutingRequest } from "../proxy/routing-request.js";
import type { CandidateExplanation } from "../scheduling/policy.js";
import { placementFill } from "../scheduling/prefix-cost.js";
import { type ModelPlan, unservedBy } from "../workers/served-models.js";
import type { Worker } from "../workers/worker.js";
import { adminGuard } from "./admin.js";
import { admissionTicket } from "./admission-ticket.js";
import type { RouterContext } from "./context.js";
import { INFERENCE_ROUTES } from "./inference.js";

type Env = { Bindings: HttpBindings };

/** The dry-run prefix: POST /debug/route/v1/chat/completions takes a chat body, and so on. */
const ROUTE_EXPLAIN_PREFIX = "/debug/route";

/**
 * "Where would this request go, and why?" for an operator: POST the body a client sends to
 * `/debug/route<inference path>` and get the decision the router would take now, with every
 * candidate's matched prefix, load and (prefix_cost) cost, and why the other workers are out.
 * Nothing is sent to a worker and nothing is recorded (no index insert, no session binding).
 * Behind the admin API's guard: it shows the fleet's URLs and load.
 */
export function registerRouteExplainRoutes(app: Hono<Env>, ctx: RouterContext): void {
  app.use(`${ROUTE_EXPLAIN_PREFIX}/*`, adminGuard(ctx));
  for (const { path, endpoint } of INFERENCE_ROUTES) {
    app.post(`${ROUTE_EXPLAIN_PREFIX}${path}`, async (c) => {
      // The same receive stage as the data plane's, and the RoutingRequest it forwards.
      const { received, routing, lease } = await ctx.intake.open(c.env.incoming, endpoint);
      try {
        // Whether it would wait in the admission queue now, and why (nothing is queued).
        const admission = ctx.admission.explain(admissionTicket(ctx, received, new Cancel()));
        return c.json({ ...(await explainRoute(ctx, endpoint, routing)), admission });
      } finally {
        lease.release();
      }
    });
  }
}

async function explainRoute(ctx: RouterContext, endpoint: Endpoint, routed: RoutingRequest) {
  const { text, requested: model, adapter, session, plan } = routed;
  const workers = ctx.registry.list();
  // A pair's decode side is chosen apart, by its own (load) policy, over the decode workers.
  const pairs = ctx.forwarder.pairs;
  const side = pairs === undefined ? undefined : "prefill";
  // The same candidates as the forwarder's: the model's plan over the available workers (with
  // pairs: the prefill side's, where the prefix cache is).
  const available = (role?: "prefill" | "decode") =>
    plan.route === "not_found" ? [] : ctx.registry.candidates(undefined, role, plan);
  const candidates = available(side);
  await ctx.decider.prepare(() => candidates, routed);
  const { decision, matched, fill, indexes, profile } = ctx.decider.explain(candidates, routed);
  const decodes = pairs === undefined ? [] : available("decode");
  const decode = pairs?.decodeDecider.explain(decodes, routed).decision;
  const policy = ctx.decider.policy;
  // The fill the cost weighs (scheduling/prefix-cost.ts placementFill).
  const fills = placementFill(fill ?? undefined, matched ?? undefined, candidates.length);
  const now = Date.now();
  const length = text.length;
  return {
    dry_run: true,
    policy: policy.name,
    // A scheduling profile: its picker, and the filters undone because they left no one.
    ...(profile === undefined
      ? {}
      : { profile: profile.profile, picker: profile.picker, failed_open: profile.failedOpen }),
    endpoint,
    model: model ?? null,
    adapter: adapter ?? null,
    // How the model picked workers: unnamed | listed | any_name | not_found (the router's 404).
    model_route: plan.route,
    model_routing: ctx.config.modelRouting,
    routing_text_chars: length,
    session: session !== undefined,
    decision:
      decision === undefined
        ? null
        : {
            worker: decision.worker.id,
            url: decision.worker.url,
            branch: decision.branch,
            match_rate: decision.matchRate,
          },
    // With disaggregation: the pair, its protocol and the decode side's choice among its workers.
    ...(pairs === undefined
      ? {}
      : {
          pair: {
            protocol: pairs.protocol.name,
            prefill: decision?.worker.id ?? null,
            decode: decode?.worker.id ?? null,
            decode_url: decode?.worker.url ?? null,
            decode_policy: pairs.decodeDecider.policy.name,
            decode_branch: decode?.branch ?? null,
            decode_candidates: decodes.map((worker) => ({
              worker: worker.id,
              url: worker.url,
              in_flight: worker.inFlight,
            })),
          },
        }),
    candidates: candidates.map((worker, i) => {
      // As the policies see it: never more than the text.
      const held = matched === null ? null : Math.min(length, Math.max(0, matched[i] ?? 0));
      return {
        worker: worker.id,
        url: worker.url,
        matched_chars: held,
        match_rate: held === null ? null : length === 0 ? 0 : held / length,
        index: indexes?.[i] ?? null,
        in_flight: worker.inFlight,
        pending_prefill_chars: worker.pendingPrefillChars,
        engine_foreign_queue: worker.foreignQueuedAt(now) ?? null,
        cache_fill: fill?.[i] ?? null,
        ...(policy.cost !== undefined
          ? { cost: policy.cost(worker, held ?? 0, length, now, fills?.[i] ?? 0) }
          : {}),
        // A profile's verdict: the filter that removed it, or each scorer's score and weight.
        ...(profile === undefined ? {} : profileVerdict(profile.candidates[i])),
      };
    }),
    excluded: workers
      .filter((worker) => !candidates.includes(worker) && !decodes.includes(worker))
      .map((worker) => ({
        worker: worker.id,
        url: worker.url,
        ...exclusion(worker, plan, endpoint),
      })),
  };
}

function profileVerdict(verdict: CandidateExplanation | undefined) {
  return {
    filtered_by: verdict?.filteredBy ?? null,
    scores: verdict?.scores ?? {},
    total_score: verdict?.total ?? null,
  };
}

/** Why a registered worker is not a candidate for this request (the model's reason in `detail`). */
function exclusion(
  worker: Worker,
  plan: ModelPlan,
  endpoint: Endpoint,
): { reason: string; detail?: string } {
  const unserved = unservedBy(worker, endpoint);
  if (unserved !== undefined) return { reason: "endpoint_not_served", detail: unserved };
  const detail = plan.exclusion(worker);
  if (detail !== undefined) return { reason: "model_not_served", detail };
  if (!worker.healthy) return { reason: "unhealthy" };
  if (worker.coolDownMs > 0) return { reason: "cooling_down" };
  const circuit = worker.breaker.state;
  if (circuit !== "closed" && !worker.breaker.admits()) return { reason: `circuit_${circuit}` };
  if (plan.route === "not_found") return { reason: "model_not_served" };
  if (plan.route === "endpoint_not_served") return { reason: "endpoint_not_served" };
  return { reason: "unavailable" };
}
