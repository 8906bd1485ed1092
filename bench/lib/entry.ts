import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname } from "node:path";
import { pathToFileURL } from "node:url";

/** How this run was started, as an npm command (recorded next to the figures it produced). */
export function commandLine(script: string): string {
  const args = process.argv.slice(2);
  return args.length === 0 ? `npm run ${script}` : `npm run ${script} -- ${args.join(" ")}`;
}

/** Runs `main` when the module is the process's entry point (not when a test imports it). */
export function runIfEntryPoint(moduleUrl: string, main: () => Promise<void>): void {
  if (process.argv[1] === undefined || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main().catch((err: unknown) => {
    console.error(err);
    process.exit(1);
  });
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
