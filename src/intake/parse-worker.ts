/**
 * A parse worker thread (see parse-pool.ts): parses one large request body at a time off the
 * event loop and posts back its summary, or the RouterError it raised.
 */
import { parentPort } from "node:worker_threads";
import { RouterError } from "../errors.js";
import { summarizeBody } from "./body-summary.js";
import type { ParseJob, ParseResult } from "./parse-pool.js";

const port = parentPort;
if (port === null) throw new Error("parse-worker.ts must run in a worker thread");

port.on("message", (job: ParseJob) => {
  let result: ParseResult;
  try {
    result = {
      id: job.id,
      summary: summarizeBody(job.endpoint, job.body, job.maxChars, job.withTokenizeInput),
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
  port.postMessage(result);
});
