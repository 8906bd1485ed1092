/**
 * --data-plane nginx assembled: the relays the forwarder hands its attempts to, radixgate's
 * internal listener (a unix socket in a private directory), the completion log nginx writes to,
 * and nginx itself, supervised (docs/data-planes.md).
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type RequestListener, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Logger } from "../logger.js";
import { nginxConfig } from "../nginx/config.js";
import { type CompletionLog, readCompletionLog } from "../nginx/log-reader.js";
import { NJS_SCRIPT } from "../nginx/script.js";
import { freePort, NginxSupervisor, njsModulePath } from "../nginx/supervisor.js";
import { RemoteRelays } from "../proxy/remote-relay.js";
import { INFERENCE_ROUTES } from "../routes/inference.js";
import type { WorkerRegistry } from "../workers/registry.js";
import type { Worker } from "../workers/worker.js";

export interface NginxPlaneOptions {
  readonly binary: string;
  readonly host: string;
  readonly port: number;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxBodyBytes: number;
  readonly waitHeader: string | undefined;
  readonly explainHeader: string | undefined;
  /** A Responses answer's id nginx read, with its worker (RemoteRelayOptions.onResponseId). */
  readonly onResponseId?: ((responseId: string, worker: Worker) => void) | undefined;
}

export class NginxPlane {
  readonly relays: RemoteRelays;
  /** The workers' origins → their named upstreams in the running nginx.conf. */
  private readonly upstreams = new Map<string, string>();
  /**
   * A worker's URL → where nginx sends its requests, worked out once (a URL parse per decision
   * was about 5% of the decision's CPU); emptied with each nginx.conf, bounded for a fleet whose
   * workers come and go.
   */
  private readonly origins = new Map<string, string>();
  private dir: string | undefined;
  private internal: Server | undefined;
  private log: CompletionLog | undefined;
  private supervisor: NginxSupervisor | undefined;
  private stopped = false;
  /** The port nginx listens on (chosen at start for --port 0). */
  port: number;

  constructor(
    private readonly o: NginxPlaneOptions,
    private readonly logger: Logger,
  ) {
    this.port = o.port;
    this.relays = new RemoteRelays({
      upstreamOrigin: (worker) => this.upstreamOrigin(worker.url),
      readsUsage: true,
      waitHeader: o.waitHeader,
      sendsWorkerAuth: true,
      firstByte: "unseen",
      onResponseId: o.onResponseId,
    });
  }

  private upstreamOrigin(url: string): string {
    let origin = this.origins.get(url);
    if (origin === undefined) {
      const own = new URL(url).origin;
      const name = this.upstreams.get(own);
      origin = name === undefined ? own : `http://${name}`;
      if (this.origins.size >= MAX_ORIGINS) this.origins.clear();
      this.origins.set(url, origin);
    }
    return origin;
  }

  /** nginx's process id while it runs (tests, benchmarks). */
  get nginxPid(): number | undefined {
    return this.supervisor?.pid;
  }

  /** nginx accepts connections now. */
  get nginxReady(): boolean {
    return this.supervisor?.ready ?? false;
  }

  /** How many times nginx was started (a restart after it died counts). */
  get nginxStarts(): number {
    return this.supervisor?.starts ?? 0;
  }

  /** radixgate's own listener, on the private unix socket; the public port is chosen too. */
  async listen(listener: RequestListener): Promise<void> {
    // Checked first: without njs there is nothing to start.
    njsModulePath(this.o.binary);
    if (this.port === 0) this.port = await freePort(this.o.host);
    this.dir = mkdtempSync(join(tmpdir(), "radixgate-nginx-"));
    const socket = join(this.dir, "radixgate.sock");
    const server = createServer(listener);
    server.requestTimeout = 0;
    server.headersTimeout = 60_000;
    server.keepAliveTimeout = 65_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socket, () => resolve());
    });
    this.internal = server;
    this.log = await readCompletionLog((record) => this.relays.complete(record));
  }

  /** Starts nginx in front of the fleet as it is now; resolves once it accepts connections. */
  async start(registry: WorkerRegistry): Promise<void> {
    const dir = this.dir as string;
    const log = this.log as CompletionLog;
    const njs = njsModulePath(this.o.binary);
    writeFileSync(join(dir, "radixgate.js"), NJS_SCRIPT, { mode: 0o600 });
    this.supervisor = new NginxSupervisor({
      binary: this.o.binary,
      dir,
      host: this.o.host,
      port: this.port,
      logger: this.logger,
      // Each start names the fleet's workers of that moment (kept-alive connections); a worker
      // added later is reached by its address, with no reload.
      config: () => {
        this.upstreams.clear();
        this.origins.clear();
        const upstreams = registry.list().flatMap((worker, i) => {
          const url = new URL(worker.url);
          if (url.protocol !== "http:") return [];
          const name = `rg_w${i}`;
          this.upstreams.set(url.origin, name);
          return [{ name, address: url.port === "" ? `${url.hostname}:80` : url.host }];
        });
        return nginxConfig({
          dir,
          host: this.o.host,
          port: this.port,
          socket: join(dir, "radixgate.sock"),
          logPort: log.port,
          paths: INFERENCE_ROUTES.map((r) => r.path),
          upstreams,
          njsModule: njs,
          connectTimeoutMs: this.o.connectTimeoutMs,
          readTimeoutMs: this.o.idleTimeoutMs,
          maxBodyBytes: this.o.maxBodyBytes,
          waitHeader: this.o.waitHeader,
          explainHeader: this.o.explainHeader,
          workerProcesses: 0,
        });
      },
      onExit: () => {
        const lost = this.relays.expireAll();
        if (lost > 0) this.logger.warn({ lost }, "requests nginx was relaying are lost");
      },
    });
    // --port 0: the port chosen a moment ago may have been taken since; choose again.
    for (let tries = 1; ; tries++) {
      try {
        await this.supervisor.start();
        return;
      } catch (err) {
        if (this.o.port !== 0 || tries >= 3 || !/in use/i.test((err as Error).message)) throw err;
        this.port = await freePort(this.o.host);
        this.supervisor.port = this.port;
        registry.setListenAddress({ host: this.o.host, port: this.port });
      }
    }
  }

  /** Stops nginx (first), the completion log and the internal listener; removes the directory. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    await this.supervisor?.stop();
    this.log?.close();
    this.internal?.close();
    this.internal?.closeAllConnections();
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }

  /** Closes the internal listener to new connections (graceful shutdown's first step). */
  closeInternal(): void {
    this.internal?.close();
    this.internal?.closeIdleConnections();
  }
}

/** Worker URLs whose origin is kept at once (far more than any fleet has workers). */
const MAX_ORIGINS = 4096;
