/**
 * A parse process (see isolated-parse.ts): for each request, imports the parser module it names,
 * runs the parser on the file's text and posts back the value or the error's message.
 */
import type { ParseOutcome, ParseRequest } from "./isolated-parse.js";
import { parentChannel } from "./module-process.js";

const port = parentChannel();

port.onMessage(async (message) => {
  const request = message as ParseRequest;
  let outcome: ParseOutcome;
  try {
    const module = (await import(request.parser.module)) as Record<string, unknown>;
    const parse = module[request.parser.name] as (text: string, path: string) => unknown;
    outcome = { id: request.id, value: parse(request.text, request.path) };
  } catch (err) {
    outcome = { id: request.id, error: err instanceof Error ? err.message : String(err) };
  }
  port.post(outcome);
});
