import type { IncomingMessage, ServerResponse } from "node:http";
import { RouterError } from "../errors.js";
import { type BodyReadLimits, readBody } from "../intake/read-body.js";
import type { Endpoint } from "../intake/routing-text.js";
import type { CompletionRecord, RemoteRelays } from "../proxy/remote-relay.js";
import { writeError } from "../proxy/write-error.js";
import { isResponseId } from "../workers/response-holders.js";
import type { RouterContext } from "./context.js";
import { handleInference } from "./pipeline.js";

/** The last status of nginx's $upstream_status ("200 : 502" after a redirect: 502). */
function lastStatus(value: string | string[] | undefined): number {
  const text = typeof value === "string" ? value : "";
  return Number(text.split(/[ ,:]+/).pop());
}

/**
 * One call of a relay about a request (nginx's, or a replica's relaying for this one as leader,
 * proxy/leader-decisions.ts): `decide` runs the request's pipeline, whose attempts answer it;
 * `retry`, `body`, `first-byte` and `complete` are about a request decided before (by the key its
 * decision gave, in x-radixgate-request). `complete` carries the relay's completion record as JSON (nginx's come
 * through its log instead). The call header is already taken off.
 */
export function answerRelayCall(
  ctx: RouterContext,
  relays: RemoteRelays,
  incoming: IncomingMessage,
  res: ServerResponse,
  call: string | string[],
  endpoint: Endpoint | undefined,
): void {
  const headers = incoming.headers;
  // The exchange's key from the decision (x-rg-key), not the client's request id.
  const named = headers["x-radixgate-request"];
  const key = typeof named === "string" ? named : "";
  if (call === "retry") {
    if (!relays.retry(key, res, lastStatus(headers["x-radixgate-failed"]))) {
      const error = new RouterError(
        "upstream_error",
        "The worker could not be reached and the request is no longer known to the router.",
      );
      writeError(res, error, "");
    }
    incoming.resume();
    return;
  }
  if (call === "body") {
    const body = relays.body(key);
    if (body === undefined) {
      writeError(res, new RouterError("not_found", "No rewritten body for this request."), "");
    } else {
      res.writeHead(200, { "content-length": body.length });
      res.end(body);
    }
    incoming.resume();
    return;
  }
  if (call === "first-byte") {
    relays.firstByteCame(key);
    res.writeHead(204).end();
    incoming.resume();
    return;
  }
  if (call === "complete") {
    // Never rejects: a body that is not a record is answered 400.
    void readCompletion(incoming, key).then((record) => {
      if (record === undefined) {
        writeError(res, new RouterError("invalid_request", "Not a completion record."), "");
        return;
      }
      relays.complete(record);
      res.writeHead(204).end();
    });
    return;
  }
  const url = incoming.url ?? "/";
  if (call !== "decide" || incoming.method !== "POST" || endpoint === undefined) {
    writeError(res, new RouterError("not_found", `No inference route ${url}.`), "");
    incoming.resume();
    return;
  }
  relays.open(res);
  // One reaction to the request's end, not a catch and a finally (two more promises a call).
  const close = () => relays.close(res);
  handleInference(ctx, incoming, res, endpoint).then(close, (err: unknown) => {
    ctx.logger.error({ err }, "unhandled error in the data plane");
    close();
  });
}

/** A completion record's JSON: a few numbers, far below 4 KB, within 5 s. */
const COMPLETION_LIMITS: BodyReadLimits = {
  maxBytes: 4096,
  totalTimeoutMs: 5000,
  idleTimeoutMs: 5000,
  minBytesPerSec: 0,
};

/** A `complete` call's record, checked field by field; undefined when it is not one (or unread). */
async function readCompletion(
  incoming: IncomingMessage,
  key: string,
): Promise<CompletionRecord | undefined> {
  let value: unknown;
  try {
    // The intake's reader, in its bounds: a record is a few numbers.
    const body = await readBody(incoming, COMPLETION_LIMITS);
    value = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  return completionRecord(value, key);
}

/** The record in a replica's `complete` call (proxy/leader-decisions.ts), or undefined. */
export function completionRecord(value: unknown, key: string): CompletionRecord | undefined {
  if (key === "" || typeof value !== "object" || value === null || Array.isArray(value))
    return undefined;
  const o = value as Record<string, unknown>;
  const status = count(o.status);
  if (status === undefined || status < 100 || status > 599) return undefined;
  const upstream = count(o.upstream_status);
  const usage =
    count(o.prompt_tokens) === undefined
      ? undefined
      : {
          promptTokens: count(o.prompt_tokens) as number,
          cachedTokens: count(o.cached_tokens),
          completionTokens: count(o.completion_tokens),
        };
  return {
    key,
    status,
    upstreamStatus:
      upstream !== undefined && upstream >= 100 && upstream <= 599 ? upstream : undefined,
    headerMs: count(o.header_ms),
    usage,
    responseId:
      typeof o.response_id === "string" && isResponseId(o.response_id) ? o.response_id : undefined,
  };
}

/** A whole number from 0 to 2^40, else undefined. */
function count(v: unknown): number | undefined {
  return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 2 ** 40 ? v : undefined;
}
