/**
 * A parse process (see parse-pool.ts): parses one large request body at a time off the router's
 * event loop and posts back its summary, or the RouterError it raised.
 */
import { RouterError } from "../errors.js";
import { parentChannel } from "../watched-file/module-process.js";
import { summarizeBody } from "./body-summary.js";
import type { ParseJob, ParseResult } from "./parse-pool.js";

const port = parentChannel();

port.onMessage((message) => {
  const job = message as ParseJob;
  let result: ParseResult;
  try {
    result = {
      id: job.id,
      summary: summarizeBody(
        job.endpoint,
        job.body,
        job.maxChars,
        job.withTokenizeInput,
        job.pairs,
      ),
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
