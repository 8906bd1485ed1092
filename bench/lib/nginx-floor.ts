/**
 * The floor of --data-plane nginx: nginx with the configuration radixgate writes
 * (src/nginx/config.ts, the same njs script, radixgate's default timeouts and body limit), in
 * front of bench/lib/nginx-floor.mjs, a Node.js process that answers every decision with a fixed
 * X-Accel-Redirect and drops the completion datagrams. Any decision made by a Node.js process
 * called once per request costs at least this; a target this row misses cannot be met that way.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { freePort } from "../../sim/free-port.js";
import { defaultConfig } from "../../src/config.js";
import { nginxConfig } from "../../src/nginx/config.js";
import { NJS_SCRIPT } from "../../src/nginx/script.js";
import { njsModulePath, resolveNginxBinary } from "../../src/nginx/supervisor.js";
import { INFERENCE_ROUTES } from "../../src/routes/inference.js";
import { stopChild, untilAccepting } from "./child-process.js";

const SCRIPT = fileURLToPath(new URL("./nginx-floor.mjs", import.meta.url));
const START_MS = 30_000;

export interface NginxFloor {
  readonly url: string;
  /** The Node.js decider first, then nginx (one process: master_process off, as radixgate runs it). */
  pids(): number[];
  stop(): Promise<void>;
}

/** The decider's first line: the UDP port of its completion socket. */
function firstLine(child: ChildProcess, waitMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error("the floor decider did not start")), waitMs);
    lines.once("line", (line) => {
      clearTimeout(timer);
      lines.close();
      resolve(line);
    });
    child.once("exit", () => reject(new Error("the floor decider exited")));
  });
}

export async function startNginxFloor(
  binary: string,
  /** The workers, http://host:port each: named upstreams with kept-alive connections, in turn. */
  engines: readonly string[],
  /** A command nginx runs under (its binary and flags follow), e.g. callgrind. */
  wrap: readonly string[] = [],
  /** A command the Node.js decider runs under (its node and flags follow). */
  deciderWrap: readonly string[] = [],
): Promise<NginxFloor> {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-floor-"));
  chmodSync(dir, 0o700);
  const socket = join(dir, "radixgate.sock");
  const upstreams = engines.map((url, i) => ({ name: `rg_w${i}`, address: new URL(url).host }));
  const [deciderCommand = process.execPath, ...deciderLeading] = [...deciderWrap, process.execPath];
  const decider = spawn(
    deciderCommand,
    [...deciderLeading, SCRIPT, socket, ...upstreams.map((u) => u.name)],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let nginx: ChildProcess | undefined;
  const stop = async () => {
    if (nginx !== undefined) {
      const running = nginx;
      await stopChild(running, () => running.kill("SIGQUIT"));
    }
    await stopChild(decider, () => decider.kill("SIGTERM"));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const logPort = Number(
      await firstLine(decider, deciderWrap.length === 0 ? START_MS : 10 * START_MS),
    );
    const port = await freePort();
    const config = defaultConfig();
    writeFileSync(join(dir, "radixgate.js"), NJS_SCRIPT, { mode: 0o600 });
    const conf = join(dir, "nginx.conf");
    writeFileSync(
      conf,
      nginxConfig({
        dir,
        host: "127.0.0.1",
        port,
        socket,
        logPort,
        paths: INFERENCE_ROUTES.map((r) => r.path),
        upstreams,
        njsModule: njsModulePath(binary),
        connectTimeoutMs: config.workers.connectTimeoutMs,
        readTimeoutMs: config.proxy.idleTimeoutMs,
        maxBodyBytes: config.intake.maxPayloadSize,
        waitHeader: undefined,
        explainHeader: undefined,
        workerProcesses: 0,
      }),
    );
    const [command = binary, ...args] = [
      ...wrap,
      resolveNginxBinary(binary),
      "-p",
      dir,
      "-c",
      conf,
    ];
    const started = spawn(command, args, { stdio: ["ignore", "ignore", "inherit"] });
    nginx = started;
    await untilAccepting(started, port, () => new Error("nginx (floor) did not start"), START_MS);
    return {
      url: `http://127.0.0.1:${port}`,
      pids: () => [decider.pid ?? -1, started.pid ?? -1],
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
