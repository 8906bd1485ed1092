/**
 * bench:stream's load generator in a process of its own, so its event loop (tens of thousands of
 * chunks a second) does not share a core's turn with the router it measures, nor with this one.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type ChildReply, replyOf, stopChild } from "./child-process.js";
import type { StreamLoadConfig, StreamLoadResult } from "./stream-load.js";
import { TSX_EXEC_ARGV } from "./tsx-exec-argv.js";

export type StreamLoadRequest = { type: "run"; config: StreamLoadConfig } | { type: "exit" };
export type StreamLoadReply = ChildReply<StreamLoadResult>;

export interface StreamLoadProcess {
  /** One load run; rejects when the child fails or takes far longer than the run should. */
  run(config: StreamLoadConfig): Promise<StreamLoadResult>;
  close(): Promise<void>;
}

const CHILD_SCRIPT = fileURLToPath(new URL("./stream-load-child.ts", import.meta.url));

export function startStreamLoadProcess(): StreamLoadProcess {
  const child = fork(CHILD_SCRIPT, [], {
    execArgv: [...TSX_EXEC_ARGV],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return {
    run: (config) =>
      replyOf<StreamLoadResult>(
        child,
        { type: "run", config } satisfies StreamLoadRequest,
        // The load's own drain timeout is 4 lifetimes + 30 s after the window: beyond that, stuck.
        config.lifetimeMs * 6 + config.durationMs + 60_000,
        "the load process",
      ),
    close: () =>
      stopChild(child, () => {
        if (child.connected) child.send({ type: "exit" } satisfies StreamLoadRequest);
        else child.kill();
      }),
  };
}
