/** Where the container health check (src/healthcheck.ts) probes the router. */
import { readFileSync } from "node:fs";
import { parseArgv } from "./cli-options.js";

/** The flags of the router process when it runs as PID 1 (`node dist/cli.js ...`), else []. */
export function routerProcessArgs(cmdlinePath = "/proc/1/cmdline"): string[] {
  try {
    const argv = readFileSync(cmdlinePath, "utf8")
      .split("\0")
      .filter((a) => a !== "");
    const cli = argv.findIndex((a) => /(^|\/)(cli\.js|radixgate)$/.test(a));
    return cli >= 0 ? argv.slice(cli + 1) : [];
  } catch {
    return [];
  }
}

/** Where to probe, from the router's flags and environment. */
export function healthUrl(argv: readonly string[]): string {
  const config = parseArgv(argv).config.server;
  if (config.port === 0) throw new Error("--port 0 (any free port) cannot be probed from outside");
  const wildcard = config.host === "0.0.0.0" || config.host === "::" || config.host === "";
  const host = wildcard ? "127.0.0.1" : config.host;
  return `http://${host.includes(":") ? `[${host}]` : host}:${config.port}/health`;
}
