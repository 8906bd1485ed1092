/**
 * Start-up and stop of the built CLI (issue 13 item 2): time from spawn to the "radixgate
 * listening" log line and to exit after SIGTERM, and the CPU the process used, for
 * `node dist/cli.js` with no workers, and for `--help`. Needs `npm run build` first.
 *
 *   npx tsx bench/startup.ts [runs]
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { summarizeMs } from "./lib/latency.js";

const ROOT = new URL("../", import.meta.url).pathname;
const runs = Number(process.argv[2] ?? 5);

interface Run {
  listenMs: number | null;
  exitMs: number;
  cpuMs: number;
  code: number | null;
}

function once(args: string[], stopOnListen: boolean): Promise<Run> {
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    ["--require", "./bench/lib/cpu-report.cjs", "dist/cli.js", ...args],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  let listenMs: number | null = null;
  child.stderr.on("data", (d) => (err += d));
  child.stdout.on("data", (d) => {
    out += d;
    if (stopOnListen && listenMs === null && out.includes("radixgate listening")) {
      listenMs = performance.now() - t0;
      child.kill("SIGTERM");
    }
  });
  return new Promise((resolve) =>
    child.on("close", (code) => {
      const cpu = /cpu-report (\d+)/.exec(err)?.[1];
      resolve({ listenMs, exitMs: performance.now() - t0, cpuMs: Number(cpu ?? NaN), code });
    }),
  );
}

const median = (xs: number[]) => summarizeMs(xs).p50;

async function main(): Promise<void> {
  if (!existsSync(`${ROOT}dist/cli.js`)) throw new Error("run npm run build first");
  const listen: Run[] = [];
  const help: Run[] = [];
  for (let i = 0; i < runs; i++) {
    listen.push(await once(["--host", "127.0.0.1", "--port", "0"], true));
    help.push(await once(["--help"], false));
  }
  const row = (name: string, rs: Run[], first: (r: Run) => number) =>
    `| ${name} | ${median(rs.map(first)).toFixed(0)} | ${median(rs.map((r) => r.cpuMs)).toFixed(0)} | ${rs.map((r) => r.code).join(",")} |`;
  console.log(`runs: ${runs} (medians)\n`);
  console.log("| command | wall ms | CPU ms | exit codes |");
  console.log("| --- | --- | --- | --- |");
  console.log(row("node dist/cli.js (spawn to listening)", listen, (r) => r.listenMs ?? NaN));
  console.log(row("node dist/cli.js (spawn to exit after SIGTERM)", listen, (r) => r.exitMs));
  console.log(row("node dist/cli.js --help", help, (r) => r.exitMs));
}

await main();
