import type { Logger } from "../logger.js";
import type { WorkerType } from "../workers/worker-role.js";
import type { DiscoveredWorkers } from "./discovered-workers.js";
import { connectPodApi, type PodApi } from "./kubernetes-client.js";
import { type PodWorker, podWorker } from "./kubernetes-pods.js";
import {
  formatLabelSelector,
  type LabelSelector,
  parseLabelSelector,
} from "./kubernetes-selector.js";
import { PodListWatch } from "./kubernetes-watch.js";
import type { WorkerSpec } from "./worker-spec.js";

/** One kind of worker pod: its labels (`key=value` pairs) and the role its pods take. */
export interface PodPool {
  selector: readonly string[];
  type: WorkerType;
}

export interface KubernetesDiscoveryOptions {
  /** --selector (regular workers), or --prefill-selector and --decode-selector; first match wins. */
  pools: readonly PodPool[];
  /** --service-discovery-port. */
  port: number;
  /** --service-discovery-namespace ("" = every namespace). */
  namespace: string;
  /** --kubeconfig. */
  kubeconfig: string;
}

/** Bounds of the API calls (constants: the API server's own defaults are of this order). */
const LIST_TIMEOUT_MS = 15_000;
const HEADERS_TIMEOUT_MS = 15_000;
/** client-go's reflectors ask for 5-10 min; the server ends the watch then and it is resumed. */
const WATCH_TIMEOUT_SECS = 300;
/** Bookmarks come about once a minute; past the watch's own end plus this, it is dead. */
const STALL_SLACK_MS = 60_000;
const PAGE_SIZE = 500;
/** As --worker-dns: at most this many workers from the source. */
const MAX_PODS = 1024;

/**
 * --service-discovery: the workers are the running, ready pods matching --selector, at
 * http://POD_IP:--service-discovery-port, kept up to date by a list + watch of pods (as SGLang's
 * router does: sgl-project/sglang sgl-model-gateway/src/service_discovery.rs). Every change goes
 * through DiscoveredWorkers: the same membership path as the admin API, with drain and
 * --discovery-grace-secs.
 */
export class KubernetesPodSource {
  private readonly watches: { watch: PodListWatch; selector: LabelSelector; type: WorkerType }[] =
    [];
  private applying = false;
  private again = false;
  private stopped = false;
  /** Resolves when the current round of applies is over (tests and the first answer wait on it). */
  private settled: Promise<void> = Promise.resolve();

  private constructor(
    private readonly options: KubernetesDiscoveryOptions,
    private readonly workers: DiscoveredWorkers,
    private readonly logger: Logger,
  ) {}

  /**
   * Connects (throws when no Kubernetes configuration is found), lists the pods and applies them
   * (their health checks included), then watches in the background.
   */
  static async start(
    options: KubernetesDiscoveryOptions,
    workers: DiscoveredWorkers,
    logger: Logger,
  ): Promise<KubernetesPodSource> {
    const api = await connectPodApi({
      kubeconfig: options.kubeconfig,
      listTimeoutMs: LIST_TIMEOUT_MS,
      headersTimeoutMs: HEADERS_TIMEOUT_MS,
    });
    const source = new KubernetesPodSource(options, workers, logger);
    for (const pool of options.pools) {
      const selector = parseLabelSelector(pool.selector);
      source.add(api, selector, pool.type);
      logger.info(
        {
          source: "kubernetes",
          server: api.server,
          namespace: options.namespace || "(all)",
          selector: formatLabelSelector(selector),
          worker_type: pool.type,
          port: options.port,
        },
        "watching pods for workers",
      );
    }
    await Promise.all(source.watches.map((w) => w.watch.start()));
    await source.settled;
    return source;
  }

  stop(): void {
    this.stopped = true;
    for (const { watch } of this.watches) watch.stop();
  }

  /** The workers the pods stand for now; a pod matching two roles' selectors takes the first. */
  current(): WorkerSpec[] {
    const byUrl = new Map<string, PodWorker>();
    for (const { watch, selector, type } of this.watches) {
      for (const pod of watch.pods.values()) {
        const worker = podWorker(pod, selector, type, this.options.port);
        if (worker !== undefined && !byUrl.has(worker.url)) byUrl.set(worker.url, worker);
      }
    }
    return [...byUrl.values()].slice(0, MAX_PODS).map((w) => ({ url: w.url, role: w.role }));
  }

  private add(api: PodApi, selector: LabelSelector, type: WorkerType): void {
    const watch = new PodListWatch(
      api,
      {
        query: { namespace: this.options.namespace, labelSelector: formatLabelSelector(selector) },
        pageSize: PAGE_SIZE,
        maxPods: MAX_PODS,
        watchTimeoutSecs: WATCH_TIMEOUT_SECS,
        stallMs: WATCH_TIMEOUT_SECS * 1000 + STALL_SLACK_MS,
        retryInitialMs: 500,
        retryMaxMs: 30_000,
      },
      () => this.changed(),
      this.logger,
    );
    this.watches.push({ watch, selector, type });
  }

  /** Changes that arrive while an apply runs are applied together after it. */
  private changed(): void {
    if (this.stopped) return;
    if (this.applying) {
      this.again = true;
      return;
    }
    this.applying = true;
    this.settled = this.flush();
  }

  private async flush(): Promise<void> {
    try {
      do {
        this.again = false;
        // Queued behind the previous change: the set is read when this change's turn comes.
        await Promise.resolve();
        if (this.stopped) return;
        await this.workers.apply(this.current());
      } while (this.again && !this.stopped);
    } catch (err) {
      this.logger.error({ source: "kubernetes", err }, "applying discovered pods failed");
    } finally {
      this.applying = false;
    }
  }
}
