import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { type ResourceLimits, Worker } from "node:worker_threads";

/**
 * A worker thread running `entry` (a module beside its caller, given as `new URL("./x.js",
 * import.meta.url)`), unref'd so that it never keeps the process alive on its own. Built
 * (dist/), the entry is plain JavaScript; under tsx or vitest (tests, benchmarks) it is
 * TypeScript, so the thread registers tsx's loader first (a worker does not inherit the parent's
 * loader hooks on Node 20).
 */
export function startModuleThread(
  entry: URL,
  resourceLimits: ResourceLimits,
  workerData?: unknown,
): Worker {
  const worker = import.meta.url.endsWith(".ts")
    ? new Worker(tsxBootstrap(new URL(entry.href.replace(/\.js$/, ".ts"))), {
        eval: true,
        resourceLimits,
        workerData,
      })
    : new Worker(entry, { resourceLimits, workerData });
  worker.unref();
  return worker;
}

function tsxBootstrap(entry: URL): string {
  // tsx's package.json maps the ESM import of "tsx/esm/api" to dist/esm/api/index.mjs.
  const tsxRoot = dirname(createRequire(import.meta.url).resolve("tsx/package.json"));
  const tsxApi = pathToFileURL(join(tsxRoot, "dist/esm/api/index.mjs")).href;
  return `import(${JSON.stringify(tsxApi)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry.href)}); });`;
}
