import { readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

/**
 * A stand-in for the Kubernetes API server's pod list and watch, for tests (no API server runs on
 * these machines). It answers from the recorded response shapes in test/discovery/fixtures/: a
 * PodList (paged with limit/continue), and a watch as newline-delimited JSON events replayed from
 * the requested resourceVersion on, then streamed as the test changes pods. A resume from a
 * version older than the last compaction gets the API server's ERROR event with a 410 Status
 * ("too old resource version"), as a real one does; `dropWatches` cuts the open watches' sockets.
 */

const FIXTURES = new URL("../discovery/fixtures/", import.meta.url);
type Json = Record<string, unknown>;

/** The recorded pod (an SGLang worker of a Deployment) as a template. */
export const RECORDED_POD = JSON.parse(
  readFileSync(new URL("kubernetes-pod.json", FIXTURES), "utf8"),
) as Pod;
const EXPIRED_EVENT = readFileSync(new URL("kubernetes-watch-expired.json", FIXTURES), "utf8");
const FORBIDDEN = readFileSync(new URL("kubernetes-forbidden.json", FIXTURES), "utf8");

export interface Pod {
  metadata: {
    name: string;
    namespace: string;
    labels: Record<string, string>;
    annotations?: Record<string, string>;
    resourceVersion?: string;
    deletionTimestamp?: string;
  } & Json;
  status: {
    phase: string;
    podIP?: string;
    conditions: { type: string; status: string }[];
  } & Json;
}

/** The recorded pod, renamed and re-addressed, ready or not. */
export function recordedPod(
  name: string,
  podIP: string,
  options: {
    ready?: boolean;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    namespace?: string;
  } = {},
): Pod {
  const pod = structuredClone(RECORDED_POD);
  pod.metadata.name = name;
  pod.metadata.namespace = options.namespace ?? "llm";
  if (options.labels !== undefined) pod.metadata.labels = options.labels;
  if (options.annotations !== undefined) {
    pod.metadata.annotations = { ...pod.metadata.annotations, ...options.annotations };
  }
  pod.status.podIP = podIP;
  pod.status.podIPs = [{ ip: podIP }];
  setReady(pod, options.ready ?? true);
  return pod;
}

/** The Ready condition (and the container's ready flag) as the kubelet reports it. */
export function setReady(pod: Pod, ready: boolean): Pod {
  for (const c of pod.status.conditions) {
    if (c.type === "Ready" || c.type === "ContainersReady") c.status = ready ? "True" : "False";
  }
  return pod;
}

interface Event {
  version: number;
  type: "ADDED" | "MODIFIED" | "DELETED";
  pod: Pod;
}

interface OpenWatch {
  res: ServerResponse;
  namespace: string;
  selector: Map<string, string>;
}

export interface RecordedRequest {
  kind: "list" | "watch";
  path: string;
  query: Record<string, string>;
  authorization: string | undefined;
}

export interface FakeKubeApi {
  url: string;
  /** Every request, in order. */
  requests: RecordedRequest[];
  /** Adds or replaces a pod (ADDED / MODIFIED). */
  put(pod: Pod): void;
  /** Deletes a pod (DELETED). */
  remove(namespace: string, name: string): void;
  /** Cuts every open watch's connection without a clean end. */
  dropWatches(): void;
  /**
   * Forgets the history up to now: a watch resumed from before it gets 410 Gone, as an ERROR
   * event in a 200 stream (what the API server sends) or, with "status", as the response status.
   */
  compact(how?: "event" | "status"): void;
  /** The latest resourceVersion. */
  version(): string;
  /** The next `count` requests are refused with the recorded 403 Forbidden. */
  forbid(count: number): void;
  /** How many watches are open now. */
  openWatches(): number;
  /** A kubeconfig file for this server with `token`, as kubectl writes one. */
  writeKubeconfig(path: string, token: string): Promise<void>;
  close(): Promise<void>;
}

function parseSelector(raw: string | undefined): Map<string, string> {
  const selector = new Map<string, string>();
  for (const pair of (raw ?? "").split(",").filter((p) => p !== "")) {
    const [k, v] = pair.split("=");
    selector.set(k!, v ?? "");
  }
  return selector;
}

function matches(pod: Pod, namespace: string, selector: Map<string, string>): boolean {
  if (namespace !== "" && pod.metadata.namespace !== namespace) return false;
  for (const [k, v] of selector) if (pod.metadata.labels[k] !== v) return false;
  return true;
}

export async function startFakeKubeApi(): Promise<FakeKubeApi> {
  const pods = new Map<string, Pod>();
  const history: Event[] = [];
  const watches = new Set<OpenWatch>();
  const requests: RecordedRequest[] = [];
  let version = 10;
  let compactedAt = 0;
  let expireWith: "event" | "status" = "event";
  let forbidden = 0;

  const record = (type: Event["type"], pod: Pod) => {
    version++;
    const stamped = structuredClone(pod);
    stamped.metadata.resourceVersion = String(version);
    if (type === "DELETED") pods.delete(`${pod.metadata.namespace}/${pod.metadata.name}`);
    else pods.set(`${pod.metadata.namespace}/${pod.metadata.name}`, stamped);
    const event: Event = { version, type, pod: stamped };
    history.push(event);
    for (const w of watches) {
      if (matches(stamped, w.namespace, w.selector)) send(w.res, event);
    }
  };
  const send = (res: ServerResponse, event: Event) =>
    res.write(`${JSON.stringify({ type: event.type, object: event.pod })}\n`);

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", "http://x");
    const query = Object.fromEntries(url.searchParams);
    const route = /^\/api\/v1\/(?:namespaces\/([^/]+)\/)?pods$/.exec(url.pathname);
    const watch = query.watch === "true";
    requests.push({
      kind: watch ? "watch" : "list",
      path: url.pathname,
      query,
      authorization: req.headers.authorization,
    });
    if (route === null || req.method !== "GET") {
      res.writeHead(404, { "content-type": "application/json" }).end("{}");
      return;
    }
    if (forbidden > 0) {
      forbidden--;
      res.writeHead(403, { "content-type": "application/json" }).end(FORBIDDEN);
      return;
    }
    const namespace = route[1] ?? "";
    const selector = parseSelector(query.labelSelector);
    if (!watch) {
      const all = [...pods.values()].filter((p) => matches(p, namespace, selector));
      const offset = Number(query.continue ?? "0");
      const limit = Number(query.limit ?? "0") || all.length;
      const page = all.slice(offset, offset + limit);
      const next = offset + limit < all.length ? String(offset + limit) : undefined;
      res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          kind: "PodList",
          apiVersion: "v1",
          metadata: { resourceVersion: String(version), ...(next ? { continue: next } : {}) },
          items: page,
        }),
      );
      return;
    }
    const from = Number(query.resourceVersion ?? "0");
    if (from < compactedAt && expireWith === "status") {
      const status = (JSON.parse(EXPIRED_EVENT) as { object: unknown }).object;
      res.writeHead(410, { "content-type": "application/json" }).end(JSON.stringify(status));
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
    // Headers go out at once, as the API server sends them, before any event.
    res.flushHeaders();
    if (from < compactedAt) {
      res.end(`${JSON.stringify(JSON.parse(EXPIRED_EVENT))}\n`);
      return;
    }
    for (const event of history) {
      if (event.version > from && matches(event.pod, namespace, selector)) send(res, event);
    }
    const open: OpenWatch = { res, namespace, selector };
    watches.add(open);
    res.on("close", () => watches.delete(open));
  };

  const server = createServer(handle);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url,
    requests,
    put: (pod) =>
      record(
        pods.has(`${pod.metadata.namespace}/${pod.metadata.name}`) ? "MODIFIED" : "ADDED",
        pod,
      ),
    remove: (namespace, name) => {
      const pod = pods.get(`${namespace}/${name}`);
      if (pod !== undefined) record("DELETED", pod);
    },
    dropWatches: () => {
      for (const w of watches) w.res.socket?.destroy();
      watches.clear();
    },
    compact: (how = "event") => {
      compactedAt = version;
      expireWith = how;
    },
    version: () => String(version),
    forbid: (count) => {
      forbidden = count;
    },
    openWatches: () => watches.size,
    writeKubeconfig: (path, token) =>
      writeFile(
        path,
        [
          "apiVersion: v1",
          "kind: Config",
          "clusters:",
          "- name: test",
          "  cluster:",
          `    server: ${url}`,
          // Plain HTTP on 127.0.0.1: the client library wants the TLS check waived for http://.
          "    insecure-skip-tls-verify: true",
          "users:",
          "- name: radixgate",
          "  user:",
          `    token: ${token}`,
          "contexts:",
          "- name: test",
          "  context:",
          "    cluster: test",
          "    user: radixgate",
          "    namespace: llm",
          "current-context: test",
          "",
        ].join("\n"),
      ),
    close: async () => {
      for (const w of watches) w.res.socket?.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
