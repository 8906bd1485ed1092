import {
  DECODE_ROLE,
  prefillRole,
  REGULAR_ROLE,
  type WorkerRole,
  type WorkerType,
} from "../workers/worker-role.js";
import { type LabelSelector, matchesLabels } from "./kubernetes-selector.js";

/**
 * The fields of a Kubernetes Pod that discovery reads, as the API's JSON has them (the client
 * library's V1Pod from a list, or the plain object of a watch event).
 */
export interface PodObject {
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    deletionTimestamp?: unknown;
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: { type?: string; status?: string }[];
  };
}

/** One worker a pod stands for; a prefill pod's bootstrap port is its sglang.ai/bootstrap-port. */
export interface PodWorker {
  url: string;
  role: WorkerRole;
}

/**
 * SGLang's annotation for a prefill pod's bootstrap port (sgl-project/sglang
 * sgl-model-gateway/src/service_discovery.rs, `bootstrap_port_annotation`).
 */
export const BOOTSTRAP_PORT_ANNOTATION = "sglang.ai/bootstrap-port";

/**
 * radixgate's own annotation: the port this pod's engine serves on, when it is not
 * --service-discovery-port (one selector over engines of different ports, say vLLM's 8000 and
 * SGLang's 30000). SGLang's router has no such annotation; without it a pod is served at the flag's
 * port, as there.
 */
export const PORT_ANNOTATION = "radixgate.io/port";

/** "namespace/name": a pod's identity across events. */
export function podKey(pod: PodObject): string | undefined {
  const name = pod.metadata?.name;
  if (name === undefined || name === "") return undefined;
  return `${pod.metadata?.namespace ?? ""}/${name}`;
}

/**
 * The worker a pod stands for, or undefined when it takes no traffic now. Like SGLang's router, a
 * worker is a pod that matches the selector, is in phase Running with its Ready condition True,
 * and has a pod IP; its URL is http://POD_IP:PORT, PORT from the pod's radixgate.io/port annotation
 * when it has one (service_discovery.rs `PodInfo::is_healthy`,
 * `worker_url`). Unlike it, a terminating pod (deletionTimestamp set) is no worker: it drains as
 * soon as Kubernetes starts stopping it, as a Service's endpoints do.
 */
export function podWorker(
  pod: PodObject,
  selector: LabelSelector,
  type: WorkerType,
  port: number,
): PodWorker | undefined {
  const { metadata, status } = pod;
  if (!matchesLabels(selector, metadata?.labels)) return undefined;
  if (metadata?.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null) {
    return undefined;
  }
  const ready = status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
  const ip = status?.podIP;
  if (status?.phase !== "Running" || ready !== true || ip === undefined || ip === "") {
    return undefined;
  }
  const host = ip.includes(":") ? `[${ip}]` : ip;
  const role =
    type === "prefill"
      ? prefillRole(portAnnotation(metadata?.annotations?.[BOOTSTRAP_PORT_ANNOTATION]))
      : type === "decode"
        ? DECODE_ROLE
        : REGULAR_ROLE;
  const servingPort = portAnnotation(metadata?.annotations?.[PORT_ANNOTATION]) ?? port;
  return { url: `http://${host}:${servingPort}`, role };
}

/** A port number from an annotation's text; anything else (as SGLang's parse::<u16>) is none. */
function portAnnotation(value: string | undefined): number | null {
  if (value === undefined || !/^\d{1,5}$/.test(value.trim())) return null;
  const port = Number(value.trim());
  return port >= 1 && port <= 65535 ? port : null;
}
