/**
 * --engine-priority: the request's priority passed on to the engine's own scheduler, so a request
 * the router releases first is also served first inside the engine (issue 24: the engine's queue
 * is otherwise first-come-first-served behind a flood). Each engine reads a `priority` field in
 * the body only when started with priority scheduling:
 * - vLLM `--scheduling-policy priority`: a LOWER value is served first, ties by arrival
 *   (vllm/config/scheduler.py `policy`; the field on ChatCompletionRequest and CompletionRequest,
 *   vllm/entrypoints/openai/protocol.py, default 0; a non-zero value is refused without it);
 * - SGLang `--enable-priority-scheduling`: a HIGHER value is served first unless the engine also
 *   runs with `--schedule-low-priority-values-first` (python/sglang/srt/server_args.py); the
 *   field on GenerateReqInput (python/sglang/srt/managers/io_struct.py) and the OpenAI requests
 *   (python/sglang/srt/entrypoints/openai/protocol.py).
 * The router's priority is higher-first in [-100, 100] (admission/identity.ts). A body that
 * already names a `priority` is the client's choice and is left alone.
 */
import { bodyWithLeadingField } from "./json-field.js";

const FIELD = Buffer.from('"priority"');

/** The paths on which each engine reads the field. */
const PATHS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  ["vllm", new Set(["/v1/chat/completions", "/v1/completions"])],
  ["sglang", new Set(["/generate", "/v1/chat/completions", "/v1/completions"])],
]);

/** The router's priority (higher first) in the engine's convention; undefined for an unknown engine. */
export function enginePriority(engine: string | undefined, priority: number): number | undefined {
  if (engine === "vllm") return priority === 0 ? 0 : -priority;
  if (engine === "sglang") return priority;
  return undefined;
}

/**
 * The router's priority when the body sent to this engine will carry it (the worker's tally of
 * in-flight priorities counts it: workers/priority-tally.ts); undefined when it will carry none
 * from the router (no priority, an engine not read yet or without the field on this path, or a
 * body that names `priority` itself).
 */
export function prioritySent(
  body: Buffer | undefined,
  path: string,
  engine: string | undefined,
  priority: number | undefined,
): number | undefined {
  if (body === undefined || priority === undefined || engine === undefined) return undefined;
  const query = path.indexOf("?");
  if (!PATHS.get(engine)?.has(query === -1 ? path : path.slice(0, query))) return undefined;
  if (enginePriority(engine, priority) === undefined) return undefined;
  // A byte search, like dp-rank.ts: the name anywhere (even as a string value) keeps the body.
  return body.includes(FIELD) ? undefined : priority;
}

/**
 * The body as sent to the worker: with the engine's `priority` field when the router passes one
 * (`sent`: prioritySent's answer, worked out once per attempt by the forwarder).
 */
export function bodyWithPriority(
  body: Buffer | undefined,
  engine: string | undefined,
  sent: number | undefined,
): Buffer | undefined {
  const value = sent === undefined ? undefined : enginePriority(engine, sent);
  if (body === undefined || value === undefined) return body;
  return bodyWithLeadingField(body, "priority", String(value));
}
