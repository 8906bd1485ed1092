/**
 * bench:faults' measuring side in a process of its own: the legitimate clients (short chat
 * completions back to back) and the `/health` probe. The attack traffic is generated in the
 * bench's process; measured from there, its own CPU work (16 × 60 MB bodies, 1,000 pipelined
 * requests at once) showed up as the router's latency.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { type ChildReply, replyOf, stopChild } from "./child-process.js";
import { TSX_EXEC_ARGV } from "./tsx-exec-argv.js";

export interface ProbeConfig {
  url: string;
  clients: number;
  healthEveryMs: number;
  /** The model the legitimate requests name (undefined: none). */
  model?: string;
  /**
   * A worker behind the target: one more client sends it the same requests straight, so that a
   * phase tells the workers' own latency from what the target adds (undefined: none).
   */
  workerUrl?: string;
}

/** What one phase measured. */
export interface ProbeResult {
  /** Answered 200. */
  ok: number;
  /** Refused before any work (429, 503): the router said no, and said why. */
  refused: number;
  /** Accepted and lost: any other answer, a cut connection or the client's own 30 s timeout. */
  lost: number;
  p50Ms: number;
  p99Ms: number;
  worstHealthMs: number;
  healthFailures: number;
  /** The client straight to the worker (ProbeConfig.workerUrl): its p99, 0 without one. */
  workerP99Ms: number;
}

export type ProbeRequest =
  | { type: "start"; config: ProbeConfig }
  | { type: "stop" }
  | { type: "exit" };
export type ProbeReply = ChildReply<ProbeResult>;

export interface ProbeProcess {
  readonly pid: number | undefined;
  /** Starts a phase: the clients and the probe run until `stop`. */
  start(config: ProbeConfig): void;
  /** Ends the phase (requests under way are waited for, at most their own timeout). */
  stop(): Promise<ProbeResult>;
  close(): Promise<void>;
}

const CHILD_SCRIPT = fileURLToPath(new URL("./fault-probe-child.ts", import.meta.url));

export function startProbeProcess(): ProbeProcess {
  const child = fork(CHILD_SCRIPT, [], {
    execArgv: [...TSX_EXEC_ARGV],
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  return {
    pid: child.pid,
    start: (config) => child.send({ type: "start", config } satisfies ProbeRequest),
    stop: () =>
      replyOf<ProbeResult>(
        child,
        { type: "stop" } satisfies ProbeRequest,
        60_000,
        "the probe process",
      ),
    close: () =>
      stopChild(child, () => {
        if (child.connected) child.send({ type: "exit" } satisfies ProbeRequest);
        else child.kill();
      }),
  };
}
