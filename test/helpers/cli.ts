import { type ChildProcess, spawn } from "node:child_process";

const ROOT = new URL("../../", import.meta.url).pathname;

/** Runs the real CLI (through tsx) and collects its exit code and output. */
export function runCli(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; done: Promise<{ code: number | null; stdout: string; stderr: string }> } {
  const child = spawn(process.execPath, ["--import", "tsx", "src/cli.ts", ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  // A test that fails before its own kill must not leave a router listening after the run.
  const reap = () => child.kill("SIGKILL");
  process.once("exit", reap);
  child.once("exit", () => process.off("exit", reap));
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}

/** The lines of a CLI run's stderr, without the warnings npm itself may add to it. */
export function stderrLines(stderr: string): string[] {
  return stderr
    .trim()
    .split("\n")
    .filter((l) => !l.includes("npm warn"));
}

/** Flags for a CLI run that serves: loopback, a free port, no health checks. */
export const SERVE_LOCALLY = [
  "--host",
  "127.0.0.1",
  "--port",
  "0",
  "--health-check-interval-secs",
  "0",
];

/**
 * The URL of the CLI's "radixgate listening" log line, read from `child`'s stdout; rejects when
 * it does not come within `ms`, and then kills `child`, which no test can use any more.
 */
export function listeningUrl(child: ChildProcess, ms = 15_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let buffered = "";
    const onData = (d: Buffer) => {
      buffered += d;
      const url = /"url":"(http:\/\/[^"]+)"/.exec(buffered)?.[1];
      if (url === undefined) return;
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      resolve(url);
    };
    const timer = setTimeout(() => {
      child.stdout!.off("data", onData);
      child.kill("SIGKILL");
      reject(new Error(`the CLI did not log its URL within ${ms} ms`));
    }, ms);
    child.stdout!.on("data", onData);
  });
}
