/** Starts bench/lib/bare-node-proxy.mjs (the floor of a Node.js proxy) in a process of its own. */
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { freePort } from "../../sim/free-port.js";
import { stopChild, untilAccepting } from "./child-process.js";

export interface BareNodeProxy {
  readonly url: string;
  readonly pid: number;
  stop(): Promise<void>;
}

const SCRIPT = fileURLToPath(new URL("./bare-node-proxy.mjs", import.meta.url));

/** Several upstreams are taken in turn (round robin), as bench:stream's engines. */
export async function startBareNodeProxy(
  upstream: string | string[],
  /** Bodies larger than this are read and dropped, answered 200 at once (default: none). */
  drainAboveBytes?: number,
): Promise<BareNodeProxy> {
  const port = await freePort();
  const env =
    drainAboveBytes === undefined
      ? process.env
      : { ...process.env, DRAIN_ABOVE_BYTES: String(drainAboveBytes) };
  const child = spawn(process.execPath, [SCRIPT, String(port), ...[upstream].flat()], {
    stdio: ["ignore", "ignore", "inherit"],
    env,
  });
  await untilAccepting(child, port, () => new Error("the bare Node.js proxy did not start"));
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid ?? -1,
    stop: () => stopChild(child, () => child.kill("SIGTERM")),
  };
}
