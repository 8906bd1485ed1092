/** Starting and stopping the benchmarks' helper processes (nginx, the built router, the bare proxy). */
import type { ChildProcess } from "node:child_process";
import { connect } from "node:net";

function accepting(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * Waits until `child` accepts connections on 127.0.0.1:`port`; kills it and throws `failure()`
 * when it exits first or takes longer than `timeoutMs`.
 */
export function untilAccepting(
  child: ChildProcess,
  port: number,
  failure: () => Error,
  timeoutMs = 10_000,
): Promise<void> {
  return untilReady(child, () => accepting(port), failure, timeoutMs);
}

/** Polls `ready` until it says yes; kills `child` and throws `failure()` when it exits first or time runs out. */
export async function untilReady(
  child: ChildProcess,
  ready: () => Promise<boolean>,
  failure: () => Error,
  timeoutMs: number,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ready())) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw failure();
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Asks `child` to stop (`ask`: a signal, an IPC message) and resolves once it has exited; a child
 * still running after `killAfterMs` gets SIGKILL.
 */
export function stopChild(child: ChildProcess, ask: () => void, killAfterMs = 5000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill("SIGKILL"), killAfterMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    ask();
  });
}

/** What a benchmark's helper process answers to a request: its result, or why it has none. */
export type ChildReply<T> = { type: "result"; result: T } | { type: "error"; message: string };

/**
 * Sends `message` to a forked helper and resolves with the result of its next reply; rejects when
 * it replies with an error, exits, or gives nothing within `limitMs` (`who` names it then).
 */
export function replyOf<T>(
  child: ChildProcess,
  message: unknown,
  limitMs: number,
  who: string,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`${who} gave no result within ${limitMs} ms`));
    }, limitMs);
    const onExit = (code: number | null) => {
      cleanup();
      reject(new Error(`${who} exited (code ${code})`));
    };
    const onMessage = (msg: ChildReply<T>) => {
      cleanup();
      if (msg.type === "result") resolve(msg.result);
      else reject(new Error(msg.message));
    };
    const cleanup = () => {
      clearTimeout(timer);
      child.off("exit", onExit);
      child.off("message", onMessage);
    };
    child.once("exit", onExit);
    child.once("message", onMessage);
    child.send(message as object);
  });
}
