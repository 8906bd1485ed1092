import { existsSync } from "node:fs";
import { type Agent, type ClientRequest, request as httpRequest, STATUS_CODES } from "node:http";
import { request as httpsRequest, type RequestOptions } from "node:https";
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

  const core = kc.makeApiClient(k8s.CoreV1Api);

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
      const url = new URL(cluster.server + path);
      url.searchParams.set("watch", "true");
      url.searchParams.set("labelSelector", query.labelSelector);
      url.searchParams.set("resourceVersion", query.resourceVersion);
      url.searchParams.set("allowWatchBookmarks", "true");
      url.searchParams.set("timeoutSeconds", String(query.timeoutSeconds));
      // The client's own credentials and agent (TLS, proxy), on a request whose lines are bounded
      // (the library's Watch bounds neither its lines nor, apart, the wait for headers).
      const httpsOptions: RequestOptions = {};
      await kc.applyToHTTPSOptions(httpsOptions);
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(httpsOptions.headers ?? {})) {
        if (value !== undefined) headers[name] = String(value);
      }
      if (typeof httpsOptions.auth === "string") {
        headers.authorization = `Basic ${Buffer.from(httpsOptions.auth).toString("base64")}`;
      }
      return watchLines(
        url,
        {
          ...(httpsOptions.agent instanceof Object ? { agent: httpsOptions.agent as Agent } : {}),
          headers,
        },
        options.headersTimeoutMs,
        onEvent,
        onEnd,
      );
    },
  };
}

/**
 * A Pod watch line longer than this ends the watch (it is relisted and watched again): an object
 * in etcd is at most 1.5 MiB (etcd's --max-request-bytes default), so no real event comes near.
 * The client library's watch read lines with no bound: one 300 MB line took RSS to 1.57 GB.
 */
export const MAX_WATCH_LINE_BYTES = 2 * 1024 * 1024;

/**
 * GET `url` and hand each newline-delimited JSON event to `onEvent` (a line that is not JSON is
 * skipped, as the client library did). `onEnd` is called once: null when the server ends the
 * response, else the error (a status other than 200 carries it as `statusCode`). Resolves once the
 * request is sent, to the function that ends it.
 */
export async function watchLines(
  url: URL,
  request: { agent?: Agent; headers: Record<string, string> },
  headersTimeoutMs: number,
  onEvent: (type: string, object: unknown) => void,
  onEnd: WatchEnd,
  maxLineBytes = MAX_WATCH_LINE_BYTES,
): Promise<() => void> {
  let ended = false;
  let req: ClientRequest | undefined;
  const end = (err: unknown) => {
    if (ended) return;
    ended = true;
    clearTimeout(headersTimer);
    req?.destroy();
    onEnd(err);
  };
  const headersTimer = setTimeout(
    () => end(new Error(`no response headers within ${headersTimeoutMs} ms`)),
    headersTimeoutMs,
  );
  headersTimer.unref();
  const send = url.protocol === "https:" ? httpsRequest : httpRequest;
  req = send(url, { method: "GET", ...request }, (res) => {
    clearTimeout(headersTimer);
    if (res.statusCode !== 200) {
      res.resume();
      const err = new Error(
        `watch answered ${res.statusCode} ${res.statusMessage ?? STATUS_CODES[res.statusCode ?? 500] ?? ""}`,
      ) as Error & { statusCode?: number };
      err.statusCode = res.statusCode;
      return end(err);
    }
    res.socket?.setKeepAlive(true, 30_000);
    let held: Buffer[] = [];
    let heldBytes = 0;
    res.on("data", (chunk: Buffer) => {
      let from = 0;
      for (let nl = chunk.indexOf(10); nl !== -1 && !ended; nl = chunk.indexOf(10, from)) {
        const piece = chunk.subarray(from, nl);
        const line = heldBytes === 0 ? piece : Buffer.concat([...held, piece]);
        held = [];
        heldBytes = 0;
        from = nl + 1;
        eventOf(line, onEvent);
      }
      if (ended || from === chunk.length) return;
      heldBytes += chunk.length - from;
      if (heldBytes > maxLineBytes) {
        return end(new Error(`a watch line passed ${maxLineBytes} bytes without a newline`));
      }
      held.push(chunk.subarray(from));
    });
    res.on("end", () => end(null));
    res.on("error", end);
    res.on("close", () => end(null));
  });
  req.on("error", end);
  req.end();
  return () => end(null);
}

function eventOf(line: Buffer, onEvent: (type: string, object: unknown) => void): void {
  let event: { type?: unknown; object?: unknown };
  try {
    event = JSON.parse(line.toString("utf8")) as { type?: unknown; object?: unknown };
  } catch {
    return;
  }
  if (typeof event?.type === "string") onEvent(event.type, event.object);
}
