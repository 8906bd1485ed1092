import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { RequestContext, ResponseContext } from "@kubernetes/client-node";
import { UsageError } from "../errors.js";
import type { PodObject } from "./kubernetes-pods.js";

/** Where pods are listed and watched: one namespace, or every one (""). */
export interface PodQuery {
  namespace: string;
  /** `app=sglang,role=worker`. */
  labelSelector: string;
}

export interface PodListPage {
  items: PodObject[];
  resourceVersion: string;
  /** The next page's token, when there is one. */
  continueToken?: string;
}

/** What a watch reports as it ends: null when the server closed it cleanly. */
export type WatchEnd = (err: unknown) => void;

/**
 * The two calls discovery makes to the API server, through @kubernetes/client-node: a paged list
 * and a watch (newline-delimited JSON events). Each bounded: the list by `timeoutMs`, the wait for
 * the watch's response headers by `headersTimeoutMs` (its body by the caller's stall timer).
 */
export interface PodApi {
  /** The API server's address, for logs (never credentials). */
  readonly server: string;
  list(query: PodQuery, page: { limit: number; continueToken?: string }): Promise<PodListPage>;
  /** Starts a watch from `resourceVersion`; resolves once it runs, to the function that ends it. */
  watch(
    query: PodQuery & { resourceVersion: string; timeoutSeconds: number },
    onEvent: (type: string, object: unknown) => void,
    onEnd: WatchEnd,
  ): Promise<() => void>;
}

export interface PodApiOptions {
  /** --kubeconfig ("" = in-cluster, else $KUBECONFIG or ~/.kube/config). */
  kubeconfig: string;
  listTimeoutMs: number;
  headersTimeoutMs: number;
}

/** The HTTP status of a failed call (ApiException's `code`, Watch's `statusCode`). */
export function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown } | null;
  if (typeof e?.statusCode === "number") return e.statusCode;
  return typeof e?.code === "number" ? e.code : undefined;
}

/**
 * Connects to the API server. The client library is imported here, only when --service-discovery
 * is on, so a router without it never loads it. Throws a UsageError (exit 2) saying what is
 * missing when no configuration is found or it cannot be read.
 */
export async function connectPodApi(options: PodApiOptions): Promise<PodApi> {
  const k8s = await import("@kubernetes/client-node");
  const kc = new k8s.KubeConfig();
  let cluster: ReturnType<typeof kc.getCurrentCluster>;
  try {
    if (options.kubeconfig !== "") {
      kc.loadFromFile(options.kubeconfig);
    } else if (process.env.KUBECONFIG === undefined && process.env.KUBERNETES_SERVICE_HOST) {
      kc.loadFromCluster();
    } else if (process.env.KUBECONFIG || existsSync(join(homedir(), ".kube", "config"))) {
      kc.loadFromDefault();
    } else {
      throw new Error(
        "not running in a cluster (KUBERNETES_SERVICE_HOST unset), and no $KUBECONFIG or ~/.kube/config",
      );
    }
    cluster = kc.getCurrentCluster();
    if (cluster === null) throw new Error("the kubeconfig names no current cluster");
  } catch (err) {
    // A start-up mistake, reported like a bad flag (exit 2): the message, never the file's text.
    const reason = (err as Error).message.split("\n")[0]!.slice(0, 300);
    throw new UsageError(
      "--kubeconfig",
      `--service-discovery: no Kubernetes configuration to reach the API server with: ${reason}; give --kubeconfig PATH, or run the router in a pod`,
    );
  }

  // The watch's fetch takes its options from here: node-fetch's `timeout` bounds the wait for the
  // response headers (the library's Watch sets none).
  const applyToFetchOptions = kc.applyToFetchOptions.bind(kc);
  kc.applyToFetchOptions = async (opts) => ({
    ...(await applyToFetchOptions(opts)),
    timeout: options.headersTimeoutMs,
  });
  const core = kc.makeApiClient(k8s.CoreV1Api);
  const watcher = new k8s.Watch(kc);

  return {
    server: cluster.server,
    async list(query, page) {
      const signal = AbortSignal.timeout(options.listTimeoutMs);
      // A middleware (the generated client's hook, Observable-shaped) puts the deadline on the
      // request.
      const bounded = {
        middleware: [
          {
            pre: (ctx: RequestContext) => {
              ctx.setSignal(signal);
              return new k8s.Observable(Promise.resolve(ctx));
            },
            post: (rsp: ResponseContext) => new k8s.Observable(Promise.resolve(rsp)),
          },
        ],
        middlewareMergeStrategy: "append" as const,
      };
      const params = {
        labelSelector: query.labelSelector,
        limit: page.limit,
        ...(page.continueToken !== undefined ? { _continue: page.continueToken } : {}),
      };
      const list =
        query.namespace === ""
          ? await core.listPodForAllNamespaces(params, bounded)
          : await core.listNamespacedPod({ ...params, namespace: query.namespace }, bounded);
      const next = list.metadata?._continue;
      return {
        items: list.items as PodObject[],
        resourceVersion: list.metadata?.resourceVersion ?? "",
        ...(next !== undefined && next !== "" ? { continueToken: next } : {}),
      };
    },
    async watch(query, onEvent, onEnd) {
      const path =
        query.namespace === "" ? "/api/v1/pods" : `/api/v1/namespaces/${query.namespace}/pods`;
      const controller = await watcher.watch(
        path,
        {
          labelSelector: query.labelSelector,
          resourceVersion: query.resourceVersion,
          allowWatchBookmarks: true,
          timeoutSeconds: query.timeoutSeconds,
        },
        (type: string, object: unknown) => onEvent(type, object),
        onEnd,
      );
      return () => controller.abort();
    },
  };
}
