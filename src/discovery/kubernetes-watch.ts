import type { Logger } from "../logger.js";
import { backoffMs } from "../proxy/backoff.js";
import { type PodApi, type PodQuery, statusOf } from "./kubernetes-client.js";
import {
  BOOTSTRAP_PORT_ANNOTATION,
  PORT_ANNOTATION,
  type PodObject,
  podKey,
} from "./kubernetes-pods.js";

export interface PodListWatchOptions {
  query: PodQuery;
  /** Pods per list page. */
  pageSize: number;
  /** Pods kept at most; past it new ones are ignored (logged), so memory stays bounded. */
  maxPods: number;
  /** The server ends each watch after this long (the API's timeoutSeconds); it is then resumed. */
  watchTimeoutSecs: number;
  /** A watch with no event (bookmarks included) for this long is taken as dead and resumed. */
  stallMs: number;
  /** Waits between failed attempts: doubling from the first, up to the second, with jitter. */
  retryInitialMs: number;
  retryMaxMs: number;
}

/** How one watch ended. */
type WatchOutcome =
  | { kind: "closed"; events: number; ms: number }
  | { kind: "expired" }
  | { kind: "failed"; reason: string; status?: number; events: number }
  | { kind: "stopped" };

/**
 * Keeps the set of pods matching a query equal to the API server's: a list (paged), then a watch
 * from the list's resourceVersion. A watch that ends or drops is resumed from the last version
 * seen; a 410 Gone (that version is too old, in the response or as an ERROR event) lists again,
 * and the new list replaces the set (pods no longer there leave it). Failures are retried with
 * backoff; `changed` is called after every change to the set.
 */
export class PodListWatch {
  /** The pods now, by namespace/name, trimmed to the fields discovery reads. */
  readonly pods = new Map<string, PodObject>();
  /** The version to resume from; undefined until listed, and after a 410. */
  private resourceVersion: string | undefined;
  private stopped = false;
  private failures = 0;
  private endCurrent: (() => void) | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private overflowLogged = false;

  constructor(
    private readonly api: PodApi,
    private readonly options: PodListWatchOptions,
    private readonly changed: () => void,
    private readonly logger: Logger,
  ) {}

  /**
   * Lists, then watches in the background until stop(); resolves after the first list has been
   * applied or has failed (the router starts either way; a failed list is retried).
   */
  start(): Promise<void> {
    return new Promise((firstListDone) => void this.run(firstListDone));
  }

  stop(): void {
    this.stopped = true;
    this.endCurrent?.();
    clearTimeout(this.sleepTimer);
    this.wake?.();
  }

  private async run(firstListDone: () => void): Promise<void> {
    while (!this.stopped) {
      if (this.resourceVersion === undefined) {
        try {
          await this.list();
          this.failures = 0;
        } catch (err) {
          this.logFailure("list", err);
          firstListDone();
          await this.backOff();
          continue;
        }
        firstListDone();
        if (this.stopped) return;
      }
      const outcome = await this.watch(this.resourceVersion as string);
      if (outcome.kind === "stopped" || this.stopped) return;
      if (outcome.kind === "expired") {
        this.logger.info(
          { source: "kubernetes", resource_version: this.resourceVersion },
          "pod watch: resource version expired (410 Gone), listing again",
        );
        this.resourceVersion = undefined;
      } else if (outcome.kind === "failed") {
        if (outcome.events > 0) this.failures = 0;
        this.logFailure("watch", outcome);
        await this.backOff();
      } else {
        this.logger.debug(
          { source: "kubernetes", events: outcome.events, resource_version: this.resourceVersion },
          "pod watch ended: resuming",
        );
        // A watch that ends at once with nothing in it is retried with backoff, not in a loop.
        if (outcome.events === 0 && outcome.ms < 1000) await this.backOff();
        else this.failures = 0;
      }
    }
  }

  /** One full list, page by page; it replaces the set. */
  private async list(): Promise<void> {
    const pods = new Map<string, PodObject>();
    let version = "";
    let continueToken: string | undefined;
    let dropped = 0;
    do {
      const page = await this.api.list(this.options.query, {
        limit: this.options.pageSize,
        ...(continueToken !== undefined ? { continueToken } : {}),
      });
      if (version === "") version = page.resourceVersion;
      for (const pod of page.items) {
        const key = podKey(pod);
        if (key === undefined) continue;
        if (pods.size >= this.options.maxPods) dropped++;
        else pods.set(key, trimmed(pod));
      }
      continueToken = page.continueToken;
    } while (continueToken !== undefined && !this.stopped);
    if (this.stopped) return;
    if (dropped > 0) this.logOverflow(dropped);
    this.pods.clear();
    for (const [key, pod] of pods) this.pods.set(key, pod);
    this.resourceVersion = version;
    this.logger.info(
      { source: "kubernetes", pods: pods.size, resource_version: version },
      "pods listed",
    );
    this.changed();
  }

  /** One watch from `version`, until it ends, fails, stalls or stop() is called. */
  private watch(version: string): Promise<WatchOutcome> {
    return new Promise<WatchOutcome>((resolve) => {
      const started = Date.now();
      let events = 0;
      let settled = false;
      let abort: (() => void) | undefined;
      let stall: NodeJS.Timeout | undefined;
      const finish = (outcome: WatchOutcome) => {
        if (settled) return;
        settled = true;
        clearTimeout(stall);
        this.endCurrent = undefined;
        abort?.();
        resolve(outcome);
      };
      const armStall = () => {
        clearTimeout(stall);
        stall = setTimeout(
          () =>
            finish({
              kind: "failed",
              reason: `no event within ${this.options.stallMs} ms`,
              events,
            }),
          this.options.stallMs,
        );
        stall.unref();
      };
      this.endCurrent = () => finish({ kind: "stopped" });
      armStall();
      const onEvent = (type: string, object: unknown) => {
        if (settled) return;
        armStall();
        events++;
        if (type === "ERROR") {
          // A Status object: 410 means the version is gone (compacted); anything else fails.
          const status = object as { code?: number; reason?: string; message?: string };
          if (status.code === 410) finish({ kind: "expired" });
          else {
            finish({
              kind: "failed",
              reason: `ERROR event: ${status.reason ?? ""} ${status.message ?? ""}`.trim(),
              ...(status.code !== undefined ? { status: status.code } : {}),
              events,
            });
          }
          return;
        }
        this.apply(type, object as PodObject);
      };
      const onEnd = (err: unknown) => {
        if (statusOf(err) === 410) finish({ kind: "expired" });
        else if (err !== null && err !== undefined) {
          const status = statusOf(err);
          finish({
            kind: "failed",
            reason: describe(err),
            ...(status !== undefined ? { status } : {}),
            events,
          });
        } else finish({ kind: "closed", events, ms: Date.now() - started });
      };
      this.api
        .watch(
          {
            ...this.options.query,
            resourceVersion: version,
            timeoutSeconds: this.options.watchTimeoutSecs,
          },
          onEvent,
          onEnd,
        )
        .then(
          (end) => {
            abort = end;
            if (settled) end();
          },
          (err) => finish({ kind: "failed", reason: describe(err), events }),
        );
    });
  }

  /** ADDED / MODIFIED / DELETED / BOOKMARK: the set follows, the version moves on. */
  private apply(type: string, pod: PodObject): void {
    const version = pod?.metadata?.resourceVersion;
    if (version !== undefined && version !== "") this.resourceVersion = version;
    if (type === "BOOKMARK") return;
    const key = podKey(pod);
    if (key === undefined) return;
    if (type === "DELETED") {
      if (this.pods.delete(key)) this.changed();
    } else if (type === "ADDED" || type === "MODIFIED") {
      if (!this.pods.has(key) && this.pods.size >= this.options.maxPods) {
        this.logOverflow(1);
        return;
      }
      this.pods.set(key, trimmed(pod));
      this.changed();
    }
  }

  private async backOff(): Promise<void> {
    if (this.stopped) return;
    this.failures++;
    const { retryInitialMs, retryMaxMs } = this.options;
    // Equal jitter: between half the ceiling and the ceiling.
    const ms = backoffMs(this.failures, retryInitialMs, retryMaxMs, () => 0.5 + Math.random() / 2);
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
      this.sleepTimer.unref();
    });
    this.wake = undefined;
  }

  private logFailure(what: "list" | "watch", err: unknown): void {
    const outcome = err as { kind?: string; reason?: string; status?: number };
    const status = outcome.kind === "failed" ? outcome.status : statusOf(err);
    const reason = outcome.kind === "failed" ? outcome.reason : describe(err);
    const denied = status === 401 || status === 403;
    this.logger[denied ? "error" : "warn"](
      {
        source: "kubernetes",
        namespace: this.options.query.namespace || "(all)",
        status,
        reason,
        failures: this.failures + 1,
      },
      denied
        ? `pod ${what} refused: the router's service account needs list and watch on pods (RBAC, docs/discovery.md); retrying`
        : `pod ${what} failed: the workers known stay; retrying`,
    );
  }

  private logOverflow(count: number): void {
    if (this.overflowLogged) return;
    this.overflowLogged = true;
    this.logger.warn(
      { source: "kubernetes", max_pods: this.options.maxPods, ignored: count },
      "more pods match the selector than discovery keeps: the rest are ignored",
    );
  }
}

/** The fields discovery reads, so a pod's spec, managedFields and other annotations are not kept. */
function trimmed(pod: PodObject): PodObject {
  const { metadata, status } = pod;
  const annotations: Record<string, string> = {};
  for (const name of [BOOTSTRAP_PORT_ANNOTATION, PORT_ANNOTATION]) {
    const value = metadata?.annotations?.[name];
    if (value !== undefined) annotations[name] = value;
  }
  return {
    metadata: {
      ...(metadata?.name !== undefined ? { name: metadata.name } : {}),
      ...(metadata?.namespace !== undefined ? { namespace: metadata.namespace } : {}),
      ...(metadata?.labels !== undefined ? { labels: metadata.labels } : {}),
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
      ...(metadata?.deletionTimestamp !== undefined && metadata.deletionTimestamp !== null
        ? { deletionTimestamp: String(metadata.deletionTimestamp) }
        : {}),
    },
    status: {
      ...(status?.phase !== undefined ? { phase: status.phase } : {}),
      ...(status?.podIP !== undefined ? { podIP: status.podIP } : {}),
      conditions: (status?.conditions ?? []).map((c) => ({
        ...(c.type !== undefined ? { type: c.type } : {}),
        ...(c.status !== undefined ? { status: c.status } : {}),
      })),
    },
  };
}

/** A short reason for a log line: the message's first line, bounded (never request headers). */
function describe(err: unknown): string {
  const e = err as { message?: unknown; code?: unknown } | null;
  const message = typeof e?.message === "string" ? e.message : String(err);
  return message.split("\n")[0]!.slice(0, 300);
}
