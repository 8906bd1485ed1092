/**
 * nginx as a plain reverse proxy in front of the same worker, for bench:overhead's side-by-side
 * baseline (issue 12: "added latency and throughput against nginx in the same run"). Started only
 * when an nginx binary is installed (`apt-get install nginx-light`); one worker process, like the
 * router's one event loop; keep-alive to the upstream; no buffering, so streams pass through.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../sim/free-port.js";
import { njsModulePath } from "../../src/nginx/supervisor.js";
import { stopChild, untilAccepting } from "./child-process.js";
import { childPids } from "./process-cpu.js";

export interface NginxProxy {
  readonly url: string;
  /** nginx's one worker process (the one that proxies), for its CPU time; undefined if not found. */
  workerPid(): number | undefined;
  stop(): Promise<void>;
}

const CANDIDATES = ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"];

export function findNginx(): string | undefined {
  return CANDIDATES.find((path) => existsSync(path));
}

/** Whether nginx has its njs module (--data-plane nginx needs it: libnginx-mod-http-js). */
export function nginxHasNjs(): boolean {
  try {
    njsModulePath(findNginx() ?? "nginx");
    return true;
  } catch {
    return false;
  }
}

/**
 * The nginx binary, installed with apt-get (nginx-light) when missing and this process may (root,
 * apt-get present); undefined when it cannot be had. `bench` names the benchmark in the messages.
 */
export function ensureNginx(bench: string): string | undefined {
  const found = findNginx();
  if (found !== undefined) return found;
  if (process.getuid?.() !== 0 || !existsSync("/usr/bin/apt-get")) {
    console.error(`${bench}: nginx is not installed and cannot be (needs root and apt-get)`);
    return undefined;
  }
  console.log(`${bench}: installing nginx-light with apt-get ...`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const apt = (args: string[]) =>
    execFileSync("apt-get", args, { env, stdio: "ignore", timeout: 300_000 });
  try {
    apt(["install", "-y", "--no-install-recommends", "nginx-light"]);
  } catch {
    try {
      // The package lists may be missing or stale (a fresh container): refresh once and retry.
      apt(["update"]);
      apt(["install", "-y", "--no-install-recommends", "nginx-light"]);
    } catch (err) {
      console.error(`${bench}: apt-get install nginx-light failed: ${(err as Error).message}`);
    }
  }
  return findNginx();
}

/**
 * Starts nginx proxying to `upstream` (http://host:port, or several, taken in turn); undefined
 * when nginx is not installed.
 */
export async function startNginx(
  upstream: string | readonly string[],
  /** A command nginx runs under (its binary and flags follow), e.g. callgrind: one process then. */
  wrap: readonly string[] = [],
  /** Directives added to the server block (a rule that refuses an attack). */
  directives = "",
): Promise<NginxProxy | undefined> {
  const binary = findNginx();
  if (binary === undefined) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "radixgate-nginx-"));
  // Started as root, nginx's worker runs as `nobody`: it must reach the temp paths inside, where
  // a body over client_body_buffer_size is written (else such a body gets 500).
  chmodSync(dir, 0o755);
  const port = await freePort();
  const servers = (typeof upstream === "string" ? [upstream] : upstream)
    .map((url) => new URL(url))
    .map((target) => `    server ${target.hostname}:${target.port};`)
    .join("\n");
  const conf = join(dir, "nginx.conf");
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;
events { worker_connections 16384; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  upstream worker {
${servers}
    keepalive 1024;
  }
  server {
    listen 127.0.0.1:${port};
    ${directives}
    location / {
      proxy_pass http://worker;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  // Wrapped (a callgrind count): one process, which serves, as radixgate's nginx runs.
  const single = wrap.length === 0 ? [] : ["-g", "master_process off;"];
  const [command = binary, ...args] = [...wrap, binary, "-p", dir, "-c", conf, ...single];
  const child: ChildProcess = spawn(command, args, {
    stdio: ["ignore", "ignore", "inherit"],
  });
  await untilAccepting(child, port, () => {
    rmSync(dir, { recursive: true, force: true });
    return new Error(`nginx did not start (see ${join(dir, "error.log")})`);
  });
  return {
    url: `http://127.0.0.1:${port}`,
    // Asked when needed: the master forks its worker after it has opened the port.
    workerPid: () => (child.pid === undefined ? undefined : childPids(child.pid)[0]),
    // SIGQUIT: nginx's graceful shutdown.
    stop: async () => {
      await stopChild(child, () => child.kill("SIGQUIT"));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
