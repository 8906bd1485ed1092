/**
 * SGLang's PD hand-off fields. The router sends the same request to a prefill and a decode worker
 * at once, with the prefill worker's `bootstrap_host` and `bootstrap_port` and a random
 * `bootstrap_room` added: the decode worker connects to that host and port and asks for that room
 * to receive the prompt's KV cache. A batch (n > 1 chat choices, a list of completion prompts, a
 * list of /generate texts or token lists) gets one entry per item, as arrays.
 *
 * After SGLang's model gateway: sgl-project/sglang sgl-model-gateway/src/routers/http/pd_router.rs
 * (inject_bootstrap_into_value, the batch size per endpoint) and pd_types.rs (generate_room_id:
 * a random integer in [0, 2^63 - 1], as Python's random.randint(0, 2**63 - 1)).
 */
import { randomBytes } from "node:crypto";
import { bodyWithLeadingFields } from "../proxy/json-field.js";
import type { JsonObject, PairView } from "../proxy/pair.js";
import type { Worker } from "../workers/worker.js";

export type { JsonObject };

/** A random room id in [0, 2^63 - 1], as decimal text (beyond a double's exact integers). */
export function randomRoom(): string {
  return (randomBytes(8).readBigUInt64BE() & 0x7fff_ffff_ffff_ffffn).toString();
}

/**
 * How many sequences the request asks for, by endpoint; undefined for one (then the fields are
 * single values, not arrays).
 */
export function batchSize(endpoint: string, body: JsonObject): number | undefined {
  if (endpoint === "chat") {
    return typeof body.n === "number" && Number.isInteger(body.n) && body.n > 1
      ? body.n
      : undefined;
  }
  if (endpoint === "completions") {
    const prompt = body.prompt;
    // A list of strings is a batch; a list of token ids is one prompt.
    return Array.isArray(prompt) && prompt.length > 0 && typeof prompt[0] !== "number"
      ? prompt.length
      : undefined;
  }
  if (endpoint === "generate") {
    if (Array.isArray(body.text) && body.text.length > 0) return body.text.length;
    const ids = body.input_ids;
    if (Array.isArray(ids) && ids.length > 0 && Array.isArray(ids[0])) return ids.length;
  }
  return undefined;
}

/** The prefill worker's host as the decode worker dials it (no brackets around IPv6). */
export function bootstrapHost(worker: Worker): string {
  return new URL(worker.url).hostname.replace(/^\[(.*)\]$/, "$1");
}

/** The hand-off fields the router sets (a client's own are replaced). */
export const BOOTSTRAP_FIELDS = ["bootstrap_host", "bootstrap_port", "bootstrap_room"] as const;

/**
 * The body both workers get: the client's fields (its own bootstrap_* replaced) and the hand-off
 * fields, written as text so the room's 63-bit integer goes out exact. `raw` is the body as the
 * client sent it; `view` what intake's parse found of it (pd-body.ts pairView: the batch size,
 * and the body without the client's bootstrap_* fields when it sent any).
 *
 * The fields go in front of the client's bytes (proxy/json-field.ts), which are not serialized
 * again. That splice cannot replace a field: when the client sent a bootstrap_* field of its own,
 * its later duplicate would win, so the body without them is the one spliced into, as SGLang's
 * gateway overwrites them (pd_router.rs).
 */
export function bodyWithBootstrap(
  raw: Buffer,
  view: PairView,
  prefill: Worker,
  room: () => string = randomRoom,
): Buffer {
  const host = JSON.stringify(bootstrapHost(prefill));
  const port = prefill.role.bootstrapPort === null ? "null" : String(prefill.role.bootstrapPort);
  const n = view.batch;
  const values =
    n === undefined
      ? [host, port, room()]
      : [
          `[${Array(n).fill(host).join(",")}]`,
          `[${Array(n).fill(port).join(",")}]`,
          `[${Array.from({ length: n }, room).join(",")}]`,
        ];
  const fields = BOOTSTRAP_FIELDS.map((name, i) => [name, values[i]!] as const);
  const base = view.base === undefined ? raw : Buffer.from(view.base);
  return bodyWithLeadingFields(base, fields);
}
