import type { ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import { noAvailableWorkerMessage } from "../workers/no-worker-message.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { ModelPlan, ModelRoutingMode } from "../workers/served-models.js";
import type { Cancel } from "./cancel.js";
import type { ForwardRequest } from "./forward-contract.js";
import { hasPassedThrough } from "./headers.js";
import type { AttemptFailure } from "./upstream-failure.js";
import { writeError } from "./write-error.js";

// The router's own answers when no worker takes a request (proxy/forward.ts): what it says, why,
// and when to come back; and how a request whose attempts all failed ends.

/** The 404 when no worker lists the model and none takes any name (workers/served-models.ts). */
export function modelNotFound(model: string | undefined, workers: number, mode: ModelRoutingMode) {
  const anyName =
    mode === "engine"
      ? ", and none takes any model name (SGLang, or a worker listing no models)"
      : "";
  return new RouterError(
    "model_not_found",
    `The model '${model}' is not served by any of the ${workers} workers: none lists it${anyName}; GET /v1/models lists the models they serve.`,
  );
}

/**
 * A request loop (it already passed through this router: a worker URL points back at it) or an
 * unknown model: answered before any worker is chosen. The regular forwarder and the PD pair
 * forwarder both ask this first.
 */
export function refusal(
  req: ForwardRequest,
  via: string,
  registry: WorkerRegistry,
  mode: ModelRoutingMode,
): { error: RouterError; kind: "loop_detected" | "model_not_found" | "not_found" } | undefined {
  if (hasPassedThrough(req.headers.via, via)) {
    const error = new RouterError(
      "loop_detected",
      `Request loop: this request already passed through this router (Via: ${via}); a worker URL points back at the router.`,
    );
    return { error, kind: "loop_detected" };
  }
  const routed = req.routing;
  if (routed.plan.route === "endpoint_not_served") {
    // As the engines answer a path they do not serve: 404.
    const error = new RouterError(
      "not_found",
      `No worker serves ${req.path}: ${routed.plan.unserved}.`,
    );
    return { error, kind: "not_found" };
  }
  if (routed.plan.route !== "not_found") return undefined;
  const error = modelNotFound(routed.requested, registry.list().length, mode);
  return { error, kind: "model_not_found" };
}

/** The 503's message: no worker registered, none available, or none available that the model admits. */
export function noWorkerMessage(
  registry: WorkerRegistry,
  model: string | undefined,
  plan: ModelPlan,
): string {
  const available = registry.candidates();
  // Available workers exist, but the model admits none of them; the workers it admits (they list
  // it, or take any name) are down. Say so, not "none is up".
  if (available.length > 0 && !available.some(plan.admits)) {
    const admits = registry.list().filter(plan.admits).length;
    return `No available worker serves the model '${model}': the ${available.length} available workers do not list it (GET /v1/models), and the ${admits} that ${plan.route === "listed" ? "list it or whose model list is not known yet" : "take any model name (SGLang, or no model list known)"} are unavailable (unhealthy, circuit open or cooling down after Retry-After).`;
  }
  // The same words as GET /v1/models for the same fleet.
  return noAvailableWorkerMessage(registry);
}

/** ms until the first cooling-down worker that is otherwise available returns, 0 when none. */
export function shortestCoolDown(registry: WorkerRegistry): number {
  let shortest = 0;
  for (const worker of registry.list()) {
    const left = worker.coolDownMs;
    if (left > 0 && worker.healthy && (shortest === 0 || left < shortest)) shortest = left;
  }
  return shortest;
}

/**
 * How a request ends when its attempts ran out without an answer: 499 when the client left, else
 * the last failure's error is written. Undefined when no attempt failed (the caller says why there
 * was no worker).
 */
export function attemptsOutcome(
  req: { clientSignal: Cancel; requestId: string },
  res: ServerResponse,
  attempts: number,
  lastFailure: AttemptFailure | undefined,
): { status: number; attempts: number; error: string } | undefined {
  if (req.clientSignal.aborted) return { status: 499, attempts, error: "client_abort" };
  if (lastFailure === undefined) return undefined;
  const error = new RouterError(lastFailure.code, lastFailure.message);
  writeError(res, error, req.requestId);
  return { status: error.status, attempts, error: lastFailure.kind };
}
