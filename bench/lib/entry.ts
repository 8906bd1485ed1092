import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** How this run was started, as an npm command (recorded next to the figures it produced). */
export function commandLine(script: string): string {
  const args = process.argv.slice(2);
  return args.length === 0 ? `npm run ${script}` : `npm run ${script} -- ${args.join(" ")}`;
}

/** Runs `main` when the module is the process's entry point (not when a test imports it). */
export function runIfEntryPoint(moduleUrl: string, main: () => Promise<void>): void {
  if (process.argv[1] === undefined || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main().catch((err: unknown) => {
    // A flag the benchmark does not take: its header says how it runs, not a stack trace.
    if ((err as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const asked = process.argv.includes("--help") || process.argv.includes("-h");
      if (!asked) console.error(`${(err as Error).message}\n`);
      console.error(usageOf(fileURLToPath(moduleUrl)));
      process.exit(asked ? 0 : 2);
    }
    console.error(err);
    process.exit(1);
  });
}

/** A benchmark file's opening comment, its usage: the lines of its first block comment. */
export function usageOf(file: string): string {
  const text = readFileSync(file, "utf8");
  const block = /\/\*\*([\s\S]*?)\*\//.exec(text)?.[1] ?? "";
  const lines = block.split("\n").map((line) => line.replace(/^\s*\* ?/, ""));
  return lines.join("\n").trim() || `no usage written in ${file}`;
}

/** The oldest Node.js the project runs on (package.json `engines`, scripts/with-node.sh). */
const MIN_NODE: readonly [number, number] = [22, 19];

/**
 * Exits with a clear message on a Node.js older than the project supports: a router started by a
 * benchmark runs on the same node, and an older one fails in ways that look like the router's
 * fault (Node 20's undici breaks the Kubernetes client).
 */
export function refuseOldNode(script: string): void {
  const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
  if (major > MIN_NODE[0] || (major === MIN_NODE[0] && minor >= MIN_NODE[1])) return;
  console.error(
    `${script}: node ${process.version} is older than ${MIN_NODE.join(".")}, the oldest radixgate supports; run it through scripts/with-node.sh, as \`npm run ${script}\` does (it fetches Node.js 24 once), or install Node.js 24 LTS.`,
  );
  process.exit(1);
}

/** The machine a run used, as recorded next to its figures. */
export function machineSummary(): string {
  return `${os.cpus().length} cores, ${os.cpus()[0]?.model ?? "?"}, node ${process.version}`;
}

/** Writes a run's results as indented JSON, creating bench/results/ when missing. */
export function writeResults(path: string, results: object): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(results, null, 2)}\n`);
}
