/**
 * nginx as a plain reverse proxy in front of the same worker, for bench:overhead's side-by-side
 * baseline (issue 12: "added latency and throughput against nginx in the same run"). Started only
 * when an nginx binary is installed (`apt-get install nginx-light`); one worker process, like the
 * router's one event loop; keep-alive to the upstream; no buffering, so streams pass through.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../sim/free-port.js";
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

/** Starts nginx proxying to `upstream` (http://host:port); undefined when nginx is not installed. */
export async function startNginx(upstream: string): Promise<NginxProxy | undefined> {
  const binary = findNginx();
  if (binary === undefined) return undefined;
  const dir = mkdtempSync(join(tmpdir(), "radixgate-nginx-"));
  const port = await freePort();
  const target = new URL(upstream);
  const conf = join(dir, "nginx.conf");
  writeFileSync(
    conf,
    `daemon off;
worker_processes 1;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} warn;
events { worker_connections 4096; }
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
    server ${target.hostname}:${target.port};
    keepalive 128;
  }
  server {
    listen 127.0.0.1:${port};
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
  const child: ChildProcess = spawn(binary, ["-p", dir, "-c", conf], {
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
