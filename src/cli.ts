#!/usr/bin/env node
import { CommanderError } from "commander";
import { commanderErrorLine } from "./cli-error.js";
import { parseArgv } from "./cli-options.js";
import type { Config } from "./config.js";
import { UsageError } from "./errors.js";
import { createLogger } from "./logger.js";
import { CLUSTER_STOP_MESSAGE, startedByNpm, watchParent } from "./parent-watch.js";
import type { RunningRouter } from "./server.js";
import { clusterSiblingLink } from "./state/sibling-link.js";

async function main(): Promise<void> {
  let config: Config;
  let warnings: string[];
  try {
    ({ config, warnings } = parseArgv(process.argv.slice(2)));
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) process.exit(0);
      usageError(commanderErrorLine(err));
    }
    if (err instanceof UsageError) usageError(err.message);
    throw err;
  }
  const logger = createLogger({ level: config.server.logLevel, json: config.server.jsonLog });
  for (const warning of warnings) logger.warn(warning);
  let router: RunningRouter | undefined;
  let signals = 0;
  let stopping = false;
  const stop = (running: RunningRouter) =>
    running.stop().then(
      () => process.exit(0),
      (err) => {
        logger.error({ err }, "error during shutdown");
        process.exit(1);
      },
    );
  // Installed before start-up, so a SIGTERM that arrives while workers are probed or the port is
  // being bound still ends in a clean stop (exit 0), not in Node's default signal death.
  const onSignal = (signal: NodeJS.Signals) => {
    signals += 1;
    if (signals > 1) {
      logger.warn({ signal }, "second signal: exiting now");
      process.exit(1);
    }
    logger.info({ signal }, "signal received");
    beginStop();
  };
  const beginStop = () => {
    if (stopping) return;
    stopping = true;
    if (router) void stop(router);
  };
  process.on("SIGTERM", onSignal);
  process.on("SIGINT", onSignal);
  if (process.send !== undefined) {
    process.on("message", (message) => {
      if (message !== CLUSTER_STOP_MESSAGE) return;
      logger.info("asked to stop by radixgate-cluster");
      beginStop();
    });
  }
  if (startedByNpm()) {
    watchParent(() => {
      logger.warn("the npm process that started radixgate is gone: stopping as on SIGTERM");
      onSignal("SIGTERM");
    });
  }
  // Loaded only now: --help, --version and a bad flag need none of the server's modules.
  const { startRouter } = await import("./server.js");
  try {
    const siblings = clusterSiblingLink();
    router = await startRouter(config, { logger, ...(siblings !== undefined ? { siblings } : {}) });
  } catch (err) {
    if (err instanceof UsageError) usageError(err.message);
    throw err;
  }
  if (stopping) void stop(router);
}

function usageError(message: string): never {
  process.stderr.write(`radixgate: error: ${message}\n`);
  process.exit(2);
}

main().catch((err) => {
  process.stderr.write(`radixgate: fatal: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exit(1);
});
