/**
 * The floor of any Node.js reverse proxy, for bench:overhead: node:http in front, undici's pool to
 * the worker behind, the body read whole and sent on, the answer streamed back. No routing, no
 * limits, no logging, no metrics. Whatever the router costs above this row is ours to cut; what
 * this row costs above nginx is the runtime's (one JavaScript event loop, two HTTP parsers).
 *
 * Run as a child process: `node --import tsx bench/lib/bare-node-proxy.ts <worker url>`; it prints
 * its own URL on stdout and exits when its parent disconnects.
 */
import { fork } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { runIfEntryPoint } from "./entry.js";
import { askCpu, type RouterReply, type RouterRequest } from "./router-process.js";
import { TSX_EXEC_ARGV } from "./tsx-exec-argv.js";

export interface BareNodeProxy {
  readonly url: string;
  /** The proxy process's CPU time so far, in µs. */
  cpuMicros(): Promise<number>;
  stop(): Promise<void>;
}

/** Starts the bare proxy in a process of its own, in front of `upstream`. */
export async function startBareNodeProxy(upstream: string): Promise<BareNodeProxy> {
  const child = fork(fileURLToPath(import.meta.url), [upstream], {
    execArgv: [...TSX_EXEC_ARGV],
    stdio: ["ignore", "pipe", "inherit", "ipc"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const line = out.split("\n")[0];
      if (out.includes("\n") && line !== undefined) resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`bare node proxy exited early (code ${code})`)));
  });
  return {
    url,
    cpuMicros: () => askCpu(child),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.disconnect();
      }),
  };
}

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "host"]);

async function main(): Promise<void> {
  const upstream = process.argv[2];
  if (upstream === undefined) throw new Error("usage: bare-node-proxy.ts <worker url>");
  const pool = new Pool(upstream, { connections: 128, pipelining: 1 });
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const headers: Record<string, string | string[]> = {};
      for (const name in req.headers) {
        const value = req.headers[name];
        if (value !== undefined && !HOP_BY_HOP.has(name) && name !== "content-length")
          headers[name] = value;
      }
      pool
        .request({
          method: req.method as "POST",
          path: req.url ?? "/",
          headers,
          body: Buffer.concat(chunks),
        })
        .then(
          (answer) => {
            const out: Record<string, string | string[]> = {};
            for (const name in answer.headers) {
              const value = answer.headers[name];
              if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
            }
            res.writeHead(answer.statusCode, out);
            answer.body.pipe(res);
          },
          () => {
            res.writeHead(502).end();
          },
        );
    });
  });
  server.keepAliveTimeout = 65_000;
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`http://127.0.0.1:${port}\n`);
  });
  process.on("disconnect", () => process.exit(0));
  process.on("message", (msg: RouterRequest) => {
    if (msg.type !== "cpu") return;
    const { user, system } = process.cpuUsage();
    process.send?.({ type: "cpu", micros: user + system } satisfies RouterReply);
  });
}

runIfEntryPoint(import.meta.url, main);
