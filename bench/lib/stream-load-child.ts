/** The child-process side of startStreamLoadProcess(): runs loads on request, exits with its parent. */

import { runStreamLoad } from "./stream-load.js";
import type { StreamLoadReply, StreamLoadRequest } from "./stream-load-process.js";

function reply(msg: StreamLoadReply): void {
  if (process.connected) process.send?.(msg);
}

process.on("message", (msg: StreamLoadRequest) => {
  if (msg.type === "exit") process.exit(0);
  runStreamLoad(msg.config).then(
    (result) => reply({ type: "result", result }),
    (err: unknown) => reply({ type: "error", message: (err as Error).message }),
  );
});

process.on("disconnect", () => process.exit(0));
