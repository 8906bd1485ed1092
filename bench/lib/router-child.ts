/** The child-process side of startRouterProcess(): one router, stopped on "exit" or orphaning. */
import { createLogger } from "../../src/logger.js";
import { type RunningRouter, startRouter } from "../../src/server.js";
import type { RouterReply, RouterRequest } from "./router-process.js";

let router: RunningRouter | undefined;
let exiting = false;

function reply(msg: RouterReply): void {
  if (process.connected) process.send?.(msg);
}

async function exit(): Promise<void> {
  if (exiting) return;
  exiting = true;
  await router?.stop(1000);
  process.exit(0);
}

process.on("message", (msg: RouterRequest) => {
  if (msg.type === "exit") {
    void exit();
    return;
  }
  startRouter(msg.config, { logger: createLogger({ level: msg.config.server.logLevel }) }).then(
    (r) => {
      router = r;
      reply({ type: "started", url: r.url });
    },
    (err: unknown) => {
      reply({ type: "error", message: (err as Error).message });
      void exit();
    },
  );
});

process.on("disconnect", () => void exit());
