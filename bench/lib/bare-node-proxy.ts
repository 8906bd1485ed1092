/** Starts bench/lib/bare-node-proxy.mjs (the floor of a Node.js proxy) in a process of its own. */
import { spawn } from "node:child_process";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { freePort } from "../../src/net/free-port.js";

export interface BareNodeProxy {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL("./bare-node-proxy.mjs", import.meta.url));

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

export async function startBareNodeProxy(upstream: string): Promise<BareNodeProxy> {
  const port = await freePort();
  const child = spawn(process.execPath, [SCRIPT, upstream, String(port)], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const deadline = Date.now() + 10_000;
  while (!(await accepting(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill("SIGKILL");
      throw new Error("the bare Node.js proxy did not start");
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? -1,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.kill("SIGTERM");
      }),
  };
}
