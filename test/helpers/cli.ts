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
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (d) => (stdout += d));
  child.stderr!.on("data", (d) => (stderr += d));
  const done = new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) =>
    child.on("exit", (code) => resolve({ code, stdout, stderr })),
  );
  return { child, done };
}
