/**
 * Under `npx radixgate` or `npm start`, npm runs the router through `sh -c`; a SIGTERM to npm
 * kills npm and that shell but never reaches the router, which would be left orphaned and still
 * listening. Node has no parent-death signal, so this polls the parent pid (a cheap syscall) and
 * reports when it changes: the process that started us is gone.
 */
export function watchParent(onGone: () => void, intervalMs = 500): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(timer);
      onGone();
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** npm sets npm_command for the scripts and bins it runs (`exec` for npx, `start` for npm start). */
export function startedByNpm(env: NodeJS.ProcessEnv = process.env): boolean {
  return (
    env.npm_command === "exec" || env.npm_command === "start" || env.npm_command === "run-script"
  );
}

/**
 * What radixgate-cluster sends its processes over IPC when the primary alone got SIGINT (a
 * `kill -INT` to it, or npm passing one on): stop as on SIGTERM. Not a signal, so a process that
 * got Ctrl-C from the terminal too does not take it for a second one (which means "exit now").
 */
export const CLUSTER_STOP_MESSAGE = "radixgate:stop";
