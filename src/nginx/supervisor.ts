/**
 * nginx as radixgate's supervised child (--data-plane nginx): one process in the foreground
 * (`daemon off`, `master_process off`, so that a kill of that one pid leaves no worker holding the
 * port), restarted when it dies, and gone when radixgate is, however radixgate ends: a small sh
 * wrapper holds a pipe from radixgate and ends nginx when that pipe closes (the kernel closes it
 * even after a SIGKILL; Node has no parent-death signal, src/parent-watch.ts).
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { join } from "node:path";
import type { Logger } from "../logger.js";

/**
 * $1 binary, $2 prefix dir, $3 conf. The wrapper's stdin is radixgate's pipe: kept as fd 3 (an
 * asynchronous list's stdin is /dev/null), read to its end, then nginx gets SIGTERM. It prints
 * nginx's pid, and ends with nginx.
 */
const WRAPPER = `exec 3<&0
"$1" -p "$2" -c "$3" </dev/null &
n=$!
echo "$n"
( cat <&3 >/dev/null; kill -TERM "$n" 2>/dev/null ) &
wait "$n"
`;

export interface SupervisorOptions {
  readonly binary: string;
  readonly dir: string;
  /** The configuration for this start (the fleet's workers as they are now). */
  config(): string;
  readonly host: string;
  port: number;
  readonly logger: Logger;
  /** nginx exited unexpectedly: what it was relaying is lost. */
  onExit(): void;
}

/**
 * How long nginx gets to accept connections after a start: milliseconds as a rule, but seconds
 * on a loaded machine or under a wrapper such as valgrind (bench:nginx-instructions).
 */
const READY_MS = 30_000;
const FIRST_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 5_000;

export class NginxSupervisor {
  private child: ChildProcess | undefined;
  private nginxPid: number | undefined;
  private stopped = false;
  /** nginx accepts connections (set after a start, cleared when it exits). */
  ready = false;
  private backoffMs = FIRST_BACKOFF_MS;
  private restartTimer: NodeJS.Timeout | undefined;
  /** Starts so far (the first included): a restart makes it 2. */
  starts = 0;

  constructor(private readonly o: SupervisorOptions) {}

  /** The port nginx listens on (changed only before a start). */
  set port(port: number) {
    this.o.port = port;
  }

  /** nginx's process id, while it runs. */
  get pid(): number | undefined {
    return this.nginxPid;
  }

  /** Starts nginx and resolves once it accepts connections; rejects if it cannot start. */
  async start(): Promise<void> {
    const conf = join(this.o.dir, "nginx.conf");
    writeFileSync(conf, this.o.config(), { mode: 0o600 });
    this.starts += 1;
    const binary = resolveNginxBinary(this.o.binary);
    const child = spawn("sh", ["-c", WRAPPER, "radixgate-nginx", binary, this.o.dir, conf], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    this.child = child;
    let stderr = "";
    child.stderr?.on("data", (d: Buffer) => {
      stderr = (stderr + d.toString()).slice(-4000);
      for (const line of d.toString().split("\n")) {
        if (line.trim() !== "") this.o.logger.warn({ nginx: line.trim() }, "nginx");
      }
    });
    const pidRead = new Promise<void>((resolve) => {
      child.stdout?.once("data", (d: Buffer) => {
        const pid = Number.parseInt(d.toString(), 10);
        if (Number.isInteger(pid) && pid > 0) this.nginxPid = pid;
        resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", resolve));
    // Restarted only once it ran: a start that fails is the caller's to handle.
    let ran = false;
    child.once("exit", (code, signal) => {
      // The old pipe's reader (the wrapper's subshell) ends with it.
      child.stdin?.end();
      if (this.child !== child) return;
      this.child = undefined;
      this.nginxPid = undefined;
      this.ready = false;
      if (this.stopped || !ran) return;
      this.o.logger.error({ code, signal }, "nginx exited; restarting it");
      this.o.onExit();
      this.scheduleRestart();
    });
    const ready = untilAccepting(this.o.host, this.o.port, READY_MS);
    const first = await Promise.race([
      ready.then(() => "ready" as const),
      exited.then(() => "exited" as const),
    ]);
    await pidRead;
    if (first !== "ready") {
      // Not accepting in time, or gone: nothing of it may stay.
      child.stdin?.end();
      if (this.nginxPid !== undefined) {
        try {
          process.kill(this.nginxPid, "SIGKILL");
        } catch {
          // Gone already.
        }
      }
      throw new Error(`nginx did not start: ${stderr.trim() || "it exited"}`);
    }
    ran = true;
    this.backoffMs = FIRST_BACKOFF_MS;
    this.ready = true;
    this.o.logger.info({ nginx_pid: this.nginxPid, port: this.o.port }, "nginx started");
  }

  private scheduleRestart(): void {
    const delay = this.backoffMs;
    this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopped) return;
      this.start().catch((err: unknown) => {
        this.o.logger.error({ err }, "nginx restart failed");
        if (!this.stopped) this.scheduleRestart();
      });
    }, delay);
  }

  /** Stops nginx (its pipe closes: SIGTERM) and waits for it, bounded. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer !== undefined) clearTimeout(this.restartTimer);
    const child = this.child;
    if (child === undefined || child.exitCode !== null) return;
    const gone = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.stdin?.end();
    const timer = setTimeout(() => {
      if (this.nginxPid !== undefined) {
        try {
          process.kill(this.nginxPid, "SIGKILL");
        } catch {
          // Gone already.
        }
      }
    }, 3000);
    await gone;
    clearTimeout(timer);
  }
}

/** Resolves once something accepts TCP connections on host:port; rejects after `ms`. */
function untilAccepting(host: string, port: number, ms: number): Promise<void> {
  const target = host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  const deadline = Date.now() + ms;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const socket = connect({ host: target, port });
      socket.once("connect", () => {
        socket.destroy();
        resolve();
      });
      socket.once("error", () => {
        socket.destroy();
        if (Date.now() > deadline) reject(new Error(`nothing accepts on ${target}:${port}`));
        else setTimeout(attempt, 20);
      });
    };
    attempt();
  });
}

/** A TCP port free a moment ago on `host`, for --port 0 (nginx must be told its port). */
export function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The nginx binary to run: a path as given, or a name looked up on PATH and then in the sbin
 * directories a non-root PATH often lacks (Debian installs nginx in /usr/sbin).
 */
export function resolveNginxBinary(name: string): string {
  if (name.includes("/")) return name;
  const dirs = [...(process.env.PATH ?? "").split(":"), "/usr/sbin", "/usr/local/sbin", "/sbin"];
  for (const dir of dirs) {
    if (dir !== "" && existsSync(join(dir, name))) return join(dir, name);
  }
  return name;
}

/**
 * Where nginx's njs module is: undefined when nginx has it built in; the path of the dynamic
 * module (Debian: libnginx-mod-http-js) otherwise. Throws a message saying what to install.
 */
export function njsModulePath(binary: string): string | undefined {
  // nginx -V prints to stderr.
  const run = spawnSync(resolveNginxBinary(binary), ["-V"], { encoding: "utf8", timeout: 10_000 });
  if (run.error !== undefined)
    throw new Error(
      `no nginx binary "${binary}" (install nginx-light, or set --nginx-binary): ${run.error.message}`,
    );
  const version = `${run.stdout}${run.stderr}`;
  if (/--add-module=[^ ]*njs/.test(version)) return undefined;
  const dir = /--modules-path=(\S+)/.exec(version)?.[1];
  const candidates = [
    ...(dir !== undefined ? [join(dir, "ngx_http_js_module.so")] : []),
    "/usr/lib/nginx/modules/ngx_http_js_module.so",
    "/usr/lib64/nginx/modules/ngx_http_js_module.so",
    "/etc/nginx/modules/ngx_http_js_module.so",
  ];
  const found = candidates.find((path) => existsSync(path));
  if (found === undefined)
    throw new Error(
      `nginx (${binary}) has no njs module: install it (Debian/Ubuntu: apt-get install libnginx-mod-http-js)`,
    );
  return found;
}
