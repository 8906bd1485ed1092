/**
 * Launches a real redis-server (not a simulation: Redis is what replicas share state through) on
 * a free 127.0.0.1 port, without persistence, for the demo, the benchmarks and the tests.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { Socket } from "node:net";
import { freePort } from "./free-port.js";

export const REDIS_INSTALL_HINT =
  "redis-server is not installed (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis)";

/** Path of redis-server on this machine, or undefined. */
export function findRedisServer(): string | undefined {
  try {
    const out = execFileSync("sh", ["-c", "command -v redis-server"], { encoding: "utf8" });
    return out.trim() || undefined;
  } catch {
    return undefined;
  }
}

let setprivPath: string | null | undefined;

/** util-linux's setpriv, when it can set a parent-death signal (Linux); undefined elsewhere. */
function findSetpriv(): string | undefined {
  if (setprivPath === undefined) {
    try {
      const out = execFileSync("sh", ["-c", "command -v setpriv"], { encoding: "utf8" }).trim();
      setprivPath = out !== "" && process.platform === "linux" ? out : null;
    } catch {
      setprivPath = null;
    }
  }
  return setprivPath ?? undefined;
}

export interface LocalRedis {
  readonly port: number;
  readonly url: string;
  stop(): Promise<void>;
}

export async function startLocalRedis(binary = findRedisServer()): Promise<LocalRedis> {
  if (binary === undefined) throw new Error(REDIS_INSTALL_HINT);
  const port = await freePort();
  const child = await spawnRedisServer(binary, port);
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}

/** Output kept for the error message when the server fails to start (its tail says why). */
const OUTPUT_TAIL_CHARS = 500;

/**
 * Spawns redis-server on 127.0.0.1:`port` without persistence and resolves once it answers PING
 * (within 10 s; otherwise it is killed and the error carries the tail of its output).
 */
export async function spawnRedisServer(binary: string, port: number): Promise<ChildProcess> {
  const args = ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"];
  // A process killed without its cleanup (a test worker when vitest gets SIGTERM, the demo on
  // SIGKILL) would leave its redis-server running: on Linux, setpriv asks the kernel to kill
  // the server when the process that started it dies.
  const setpriv = findSetpriv();
  const child =
    setpriv === undefined
      ? spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] })
      : spawn(setpriv, ["--pdeathsig", "KILL", "--", binary, ...args], {
          stdio: ["ignore", "pipe", "pipe"],
        });
  // Bounded, and always read: an unread pipe would stall a chatty server.
  let output = "";
  const keep = (d: Buffer) => {
    output = (output + d.toString()).slice(-OUTPUT_TAIL_CHARS);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) {
      throw new Error(`redis-server exited with code ${child.exitCode}: ${output}`);
    }
    if (await answersPing(port)) return child;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  child.kill("SIGKILL");
  throw new Error(`redis-server did not answer on 127.0.0.1:${port} within 10 s: ${output}`);
}

/** One inline PING over a raw socket (no client library needed to know it is up). */
function answersPing(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once("error", () => done(false));
    socket.once("data", (d) => done(d.toString().startsWith("+PONG")));
    socket.connect(port, "127.0.0.1", () => socket.write("PING\r\n"));
  });
}
