import type { ChildProcess } from "node:child_process";

/**
 * SIGKILLs a test's server process (no goodbye to its clients, as in a crash) and resolves once it
 * has exited; does nothing for a process that is gone already or was never started.
 */
export async function killChild(child: ChildProcess | undefined): Promise<void> {
  if (child === undefined || child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}
