import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { listeningUrl, runCli, SERVE_LOCALLY } from "../helpers/cli.js";

/** Resolves with the process's exit code, or "running" if it has not exited within `ms`. */
function exitWithin(
  done: Promise<{ code: number | null }>,
  ms: number,
): Promise<number | null | "running"> {
  return Promise.race([
    done.then((r) => r.code),
    new Promise<"running">((resolve) => setTimeout(() => resolve("running"), ms).unref()),
  ]);
}

describe("process behaviour", () => {
  it.each([
    ["at once", false],
    ["after requests", true],
  ])(
    "regression: stdout a closed pipe (radixgate | head -1), then SIGTERM %s: exits 0",
    async (_, withRequests) => {
      const { child, done } = runCli(SERVE_LOCALLY);
      // Read up to the first line, then close the pipe as `head -1` does.
      const url = await listeningUrl(child);
      child.stdout!.destroy();
      if (withRequests) {
        // Requests write access-log lines into the closed pipe first.
        for (let i = 0; i < 3; i++) await (await fetch(`${url}/v1/models`)).arrayBuffer();
      }
      child.kill("SIGTERM");
      const code = await exitWithin(done, 8000);
      if (code === "running") child.kill("SIGKILL");
      expect(code).toBe(0);
    },
  );

  it("scripts/sim-fleet.sh: SIGTERM stops the script and every worker it started", async () => {
    const base = await freePortPair();
    const root = new URL("../../", import.meta.url).pathname;
    const child = spawn("bash", ["scripts/sim-fleet.sh", "2", String(base)], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const up = async (port: number) =>
      fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      );
    const deadline = Date.now() + 15_000;
    while (!((await up(base)) && (await up(base + 1))) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await up(base + 1)).toBe(true);
    child.kill("SIGTERM");
    expect(
      await exitWithin(
        exited.then((code) => ({ code })),
        10_000,
      ),
    ).not.toBe("running");
    expect(await up(base)).toBe(false);
    expect(await up(base + 1)).toBe(false);
  });
});

/** Two consecutive free ports (sim-fleet.sh takes a base port). */
async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await listenOnce(0);
    if (port !== undefined && port < 65535 && (await listenOnce(port + 1)) !== undefined)
      return port;
  }
  throw new Error("no two consecutive free ports");
}

function listenOnce(port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(undefined));
    server.listen(port, "127.0.0.1", () => {
      const bound = (server.address() as { port: number }).port;
      server.close(() => resolve(bound));
    });
  });
}
