/**
 * bench:stream-memory's router: startRouter from the checkout named on the command line (this one
 * or a base built elsewhere), run with --expose-gc; on "heap" it collects garbage and reports its
 * memory, so open streams are counted by what they hold, not by garbage not yet collected.
 *   node --import tsx --expose-gc memory-router-child.ts <checkout root>
 */
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export type MemoryChildRequest =
  | { type: "start"; workerUrls: string[] }
  | { type: "heap" }
  | { type: "snapshot"; path: string }
  | { type: "exit" };
export type MemoryChildReply =
  | { type: "started"; url: string }
  | { type: "heap"; heapUsed: number; external: number; rss: number }
  | { type: "error"; message: string };

const root = process.argv[2] ?? process.cwd();
const src = (path: string) => pathToFileURL(join(root, "src", path)).href;
const { startRouter } = (await import(src("server.ts"))) as typeof import("../../src/server.js");
const configModule = (await import(src("config.ts"))) as {
  defaultConfig: () => object;
  /** Since issue 21's nested Config; a base checkout from before has only the flat defaultConfig. */
  configWith?: (values: Record<string, unknown>) => object;
};
const { createLogger } = (await import(src("logger.ts"))) as typeof import("../../src/logger.js");

let router: Awaited<ReturnType<typeof startRouter>> | undefined;
const reply = (msg: MemoryChildReply) => process.connected && process.send?.(msg);
const gc = (globalThis as { gc?: () => void }).gc;

process.on("message", async (msg: MemoryChildRequest) => {
  if (msg.type === "exit") {
    await router?.stop(100);
    process.exit(0);
  }
  if (msg.type === "snapshot") {
    gc?.();
    const { writeHeapSnapshot } = await import("node:v8");
    writeHeapSnapshot(msg.path);
    reply({ type: "heap", heapUsed: 0, external: 0, rss: 0 });
    return;
  }
  if (msg.type === "heap") {
    // Twice: the first pass may leave what finalizers free for the second.
    gc?.();
    gc?.();
    const m = process.memoryUsage();
    reply({ type: "heap", heapUsed: m.heapUsed, external: m.external, rss: m.rss });
    return;
  }
  try {
    const settings = { host: "127.0.0.1", port: 0, workerUrls: msg.workerUrls, logLevel: "warn" };
    const config = configModule.configWith?.(settings) ?? {
      ...configModule.defaultConfig(),
      ...settings,
    };
    router = await startRouter(config as Parameters<typeof startRouter>[0], {
      logger: createLogger({ level: "warn" }),
    });
    reply({ type: "started", url: router.url });
  } catch (err) {
    reply({ type: "error", message: (err as Error).message });
  }
});
process.on("disconnect", () => process.exit(0));
