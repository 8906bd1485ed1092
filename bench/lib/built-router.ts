/**
 * The router as production runs it, for bench:overhead: `node dist/cli.js` (tsc's output, no
 * TypeScript loader in the process), built first when dist/ is missing or older than src/. Its
 * log goes to /dev/null; it is ready when /readiness answers.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../../sim/free-port.js";
import { stopChild, untilReady } from "./child-process.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLI = join(ROOT, "dist", "cli.js");
const CLUSTER = join(ROOT, "dist", "cluster.js");

export interface BuiltRouter {
  readonly url: string;
  readonly pid: number;
  /** SIGTERM and wait: a --cpu-prof profile is written as the process exits. */
  stop(): Promise<void>;
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** Runs `npm run build` unless dist/cli.js is newer than every file under src/. */
export function ensureBuilt(): void {
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= newestMtime(join(ROOT, "src"))) return;
  console.log("building dist/ (npm run build) ...");
  execFileSync("npm", ["run", "build", "--silent"], { cwd: ROOT, stdio: "inherit" });
}

export async function startBuiltRouter(
  /** CLI flags besides --host and --port, e.g. ["--worker-urls", url]. */
  args: readonly string[],
  /** Node flags, e.g. --cpu-prof. */
  nodeArgs: readonly string[] = [],
  /** Another build's dist/cli.js (bench:overhead-ab's base); default this checkout's, built if stale. */
  cli?: string,
  /** Each line the process prints on its standard output (e.g. V8's --trace-gc); default ignored. */
  onStdoutLine?: (line: string) => void,
  /** A command the process runs under (its node and flags follow), e.g. callgrind. */
  wrap: readonly string[] = [],
): Promise<BuiltRouter> {
  if (cli === undefined) ensureBuilt();
  return startBuilt(cli ?? CLI, [], args, nodeArgs, {}, onStdoutLine, wrap);
}

/**
 * `radixgate-cluster --processes N` as production runs it (`node dist/cluster.js`); its pid is
 * the primary's (its processes are the primary's children).
 */
export async function startBuiltCluster(
  processes: number,
  /** radixgate flags besides --host and --port. */
  args: readonly string[],
  /** radixgate-cluster's own flags besides --processes, e.g. --no-share. */
  clusterFlags: readonly string[] = [],
): Promise<BuiltRouter> {
  ensureBuilt();
  return startBuilt(CLUSTER, ["--processes", String(processes), ...clusterFlags, "--"], args, [], {
    // Ready once every process listens (the primary says so), not at the first one.
    stderrLine: `all ${processes} processes listening`,
  });
}

async function startBuilt(
  script: string,
  leadingArgs: readonly string[],
  args: readonly string[],
  nodeArgs: readonly string[],
  wait: { stderrLine?: string } = {},
  onStdoutLine?: (line: string) => void,
  wrap: readonly string[] = [],
): Promise<BuiltRouter> {
  const port = await freePort();
  const [command = process.execPath, ...leading] = [...wrap, process.execPath];
  const child: ChildProcess = spawn(
    command,
    [
      ...leading,
      ...nodeArgs,
      script,
      ...leadingArgs,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      ...args,
    ],
    {
      cwd: ROOT,
      stdio: [
        "ignore",
        onStdoutLine === undefined ? "ignore" : "pipe",
        wait.stderrLine === undefined ? "inherit" : "pipe",
      ],
    },
  );
  if (onStdoutLine !== undefined && child.stdout !== null) {
    let partial = "";
    child.stdout.on("data", (chunk: Buffer) => {
      const lines = (partial + chunk.toString()).split("\n");
      partial = lines.pop() ?? "";
      for (const line of lines) onStdoutLine(line);
    });
  }
  let seen = wait.stderrLine === undefined;
  child.stderr?.on("data", (chunk: Buffer) => {
    process.stderr.write(chunk);
    if (!seen && chunk.toString().includes(wait.stderrLine as string)) seen = true;
  });
  const url = `http://127.0.0.1:${port}`;
  await untilReady(
    child,
    () =>
      fetch(`${url}/readiness`).then(
        (res) => res.ok && seen,
        () => false,
      ),
    () => new Error(`the router did not become ready within 60 s (exit code ${child.exitCode})`),
    // A machine loaded by other work (load 20 on 2 cores) can take 20 s to start one; under
    // callgrind, several times that.
    wrap.length === 0 ? 60_000 : 300_000,
  );
  return {
    url,
    pid: child.pid ?? -1,
    stop: () => stopChild(child, () => child.kill("SIGTERM"), 10_000),
  };
}
