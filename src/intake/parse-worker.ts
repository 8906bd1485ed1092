/**
 * A parse process (see parse-pool.ts): parses one large request body at a time off the router's
 * event loop and posts back its summary, or the RouterError it raised.
 */
import { RouterError } from "../errors.js";
import { parentChannel } from "../watched-file/module-process.js";
import { summarizeBody } from "./body-summary.js";
import type { ParseJob, ParseResult } from "./parse-pool.js";

const port = parentChannel();

port.onMessage(async (message) => {
  const job = message as ParseJob;
  // One job at a time (the pool waits for each answer), so its bytes are the next on the channel.
  const body = await port.readBytes(job.bodyBytes);
  let result: ParseResult;
  try {
    result = {
      id: job.id,
      summary: summarizeBody(job.endpoint, body, job.maxChars, job.withTokenizeInput, job.pairs),
    };
  } catch (err) {
    const routerError = err instanceof RouterError;
    result = {
      id: job.id,
      error: {
        code: routerError ? err.code : "internal_error",
        message: (err as Error).message,
      },
    };
  }
  port.post(result);
});
