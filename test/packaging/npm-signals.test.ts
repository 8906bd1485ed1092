/**
 * Issue 19 item 6: SIGTERM or SIGINT sent to the pid a user sees (npm's) stops every entry point
 * the README names, with nothing left running or listening. npm passes the signal to the
 * `sh -c` it runs a script with, and dash does not pass it on (SIGTERM killed the shell and left
 * tsx and the demo running; SIGINT was held until the child exited, i.e. never): the scripts
 * `exec` their command, so the signal reaches tsx, which hands it to the program.
 *
 * Each run is its own process group, as a terminal's job is, so "nothing left" is checked as
 * "no process left in the group", and every port it printed refuses connections.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { connect } from "node:net";
import { promisify } from "node:util";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../helpers/router.js";

const ROOT = new URL("../../", import.meta.url).pathname;

interface EntryPoint {
  name: string;
  args: string[];
  /** Output that says it is up, and how many such lines to wait for. */
  ready: RegExp;
  readyCount: number;
}

const SERVE = ["--host", "127.0.0.1", "--port", "0", "--health-check-interval-secs", "0"];
const ENTRY_POINTS: EntryPoint[] = [
  {
    name: "npm run demo",
    args: ["run", "demo", "--", "--port", "0", "--workers", "2"],
    ready: /Ctrl-C to stop/g,
    readyCount: 1,
  },
  {
    name: "npm run demo -- --replicas 2",
    args: ["run", "demo", "--", "--port", "0", "--workers", "1", "--replicas", "2"],
    ready: /Ctrl-C to stop/g,
    readyCount: 1,
  },
  {
    name: "npm run sim",
    args: ["run", "sim", "--", "--count", "2", "--port", "0"],
    ready: /listening on http/g,
    readyCount: 2,
  },
  {
    name: "npm start",
    args: ["start", "--", ...SERVE],
    ready: /radixgate listening/g,
    readyCount: 1,
  },
  {
    name: "npm run cluster",
    args: ["run", "cluster", "--", "--processes", "2", "--", ...SERVE],
    ready: /radixgate listening/g,
    readyCount: 2,
  },
];

/** Whether any process of the group is still there. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

function refuses(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
}

describe("signals to npm's pid stop every entry point (issue 19 item 6)", () => {
  const groups: number[] = [];
  beforeAll(async () => {
    // npm start runs the build (dist/); the other scripts run the sources through tsx.
    await promisify(execFile)("npm", ["run", "build", "--silent"], { cwd: ROOT });
  }, 180_000);
  afterEach(() => {
    // A failed run must not leave its processes behind.
    for (const pgid of groups.splice(0)) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {}
    }
  });

  const cases = ENTRY_POINTS.flatMap((e) =>
    (["SIGTERM", "SIGINT"] as const).map((signal) => ({ ...e, signal })),
  );
  it.each(cases)(
    "$name stops on $signal with nothing left listening",
    async (entry) => {
      const child: ChildProcess = spawn("npm", entry.args, {
        cwd: ROOT,
        detached: true,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LOG_LEVEL: "info" },
      });
      const pid = child.pid as number;
      groups.push(pid);
      let output = "";
      child.stdout?.on("data", (d) => (output += d));
      child.stderr?.on("data", (d) => (output += d));
      let exited = false;
      child.once("exit", () => {
        exited = true;
      });
      await waitFor(
        () => (output.match(entry.ready) ?? []).length >= entry.readyCount,
        60_000,
        () => `${entry.name} to start; output so far:\n${output}`,
      );
      const ports = [
        ...new Set([...output.matchAll(/127\.0\.0\.1:(\d+)/g)].map((m) => Number(m[1]))),
      ];
      expect(ports.length).toBeGreaterThan(0);

      process.kill(pid, entry.signal);
      await waitFor(
        () => exited,
        20_000,
        () => `npm to exit after ${entry.signal}`,
      );
      await waitFor(
        () => !groupAlive(pid),
        15_000,
        () => `the group of ${entry.name} to be gone`,
      );
      for (const port of ports) expect(await refuses(port), `port ${port}`).toBe(true);
    },
    120_000,
  );
});
