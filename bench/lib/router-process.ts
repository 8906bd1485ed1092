/**
 * The real router in a child process of its own (as in production: its own event loop, not
 * shared with the load client), started with startRouter from a Config. Its stdout (the access
 * log) goes to /dev/null unless `logsTo` says otherwise.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Config } from "../../src/config.js";
import { stopChild } from "./child-process.js";
import { TSX_EXEC_ARGV } from "./tsx-exec-argv.js";

export type RouterRequest = { type: "start"; config: Config } | { type: "exit" };
export type RouterReply = { type: "started"; url: string } | { type: "error"; message: string };

export interface RouterProcess {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

const CHILD_SCRIPT = fileURLToPath(new URL("./router-child.ts", import.meta.url));

export async function startRouterProcess(
  config: Config,
  logsTo: "ignore" | "inherit" = "ignore",
  /** More node flags for the router, e.g. --cpu-prof (written when the router exits). */
  extraExecArgv: readonly string[] = [],
): Promise<RouterProcess> {
  const child = fork(CHILD_SCRIPT, [], {
    execArgv: [...TSX_EXEC_ARGV, ...extraExecArgv],
    stdio: ["ignore", logsTo, "inherit", "ipc"],
  });
  const url = await new Promise<string>((resolve, reject) => {
    const onExit = (code: number | null) =>
      reject(new Error(`router process exited early (code ${code})`));
    child.once("exit", onExit);
    child.once("error", reject);
    child.once("message", (msg: RouterReply) => {
      child.off("exit", onExit);
      if (msg.type === "started") resolve(msg.url);
      else reject(new Error(msg.message));
    });
    child.send({ type: "start", config } satisfies RouterRequest);
  }).catch((err: unknown) => {
    child.kill();
    throw err;
  });
  return {
    url,
    pid: child.pid ?? -1,
    stop: () =>
      stopChild(child, () => {
        if (child.connected) child.send({ type: "exit" } satisfies RouterRequest);
        else child.kill();
      }),
  };
}
