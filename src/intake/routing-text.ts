import { createHash, type Hash } from "node:crypto";
import { RouterError } from "../errors.js";
import { MAX_NESTING_DEPTH, nestsDeeperThan } from "../proxy/json-depth.js";

export { MAX_NESTING_DEPTH };

/**
 * The text an engine will prefill for a request, per endpoint. It only has to be prefix-stable:
 * two requests whose prompts share a prefix must produce routing texts that share a prefix.
 * Every message counts (not just the first), so multi-turn chats keep their cache affinity.
 * Anything malformed contributes nothing; the worker, not the router, validates the request,
 * with one exception: nesting deeper than MAX_NESTING_DEPTH is refused (400), because walking it
 * could exhaust the stack and no engine accepts it anyway.
 */
export type Endpoint =
  | "chat"
  | "completions"
  | "generate"
  | "embeddings"
  | "responses"
  | "rerank"
  | "score"
  | "classify"
  | "tokenize"
  | "detokenize";

type Json = Record<string, unknown>;

/**
 * Builds the routing text, at most `maxChars` characters: the text past the limit cannot change
 * which worker holds the prefix better, and a bounded text keeps tree inserts and matches bounded.
 * Truncation keeps prefix stability (a prefix of a prefix is a prefix).
 */
class BoundedText {
  private parts: string[] = [];
  private length = 0;
  constructor(private readonly maxChars: number) {}

  get full(): boolean {
    return this.length >= this.maxChars;
  }

  add(s: string): void {
    if (this.full || s === "") return;
    const room = this.maxChars - this.length;
    const piece = s.length > room ? s.slice(0, room) : s;
    this.parts.push(piece);
    this.length += piece.length;
  }

  toString(): string {
    return this.parts.join("");
  }
}

export function routingText(
  endpoint: Endpoint,
  body: Json,
  maxChars: number = Number.POSITIVE_INFINITY,
): string {
  const out = new BoundedText(maxChars);
  switch (endpoint) {
    case "chat":
      toolsText(body.tools, out);
      chatText(body.messages, out);
      break;
    case "completions":
      promptText(body.prompt, "prompt", out);
      break;
    case "generate":
      if (body.text !== undefined) promptText(body.text, "text", out);
      else promptText(body.input_ids, "input_ids", out);
      break;
    case "embeddings":
      promptText(body.input, "input", out);
      break;
    case "responses":
      responsesText(body, out);
      break;
    case "rerank":
      // Every pair the engine scores starts with the query (vLLM's pooling/score/serving.py
      // pairs it with each document; SGLang's serving_rerank.py likewise).
      promptText(body.query, "query", out);
      break;
    case "score":
      // SGLang's /v1/score `query` (serving_score.py), vLLM's `text_1` (pooling/score/protocol.py).
      promptText(body.query ?? body.text_1, body.query !== undefined ? "query" : "text_1", out);
      break;
    case "classify":
      // vLLM's `input` (pooling/classify/protocol.py), SGLang's native `text`.
      promptText(body.input ?? body.text, body.input !== undefined ? "input" : "text", out);
      break;
    case "tokenize":
    case "detokenize":
      // /tokenize and /detokenize prefill nothing: no text, so nothing enters the index.
      break;
  }
  return out.toString();
}

/**
 * The Responses API's prompt as the engines build it (vLLM's responses/serving.py and SGLang's
 * serving_responses.py `_construct_input_messages`): the instructions as the system message, then
 * the input, a string or a list of items whose text parts (input_text, output_text) and tool
 * outputs are the conversation. Tools come first, as for chat.
 */
function responsesText(body: Json, out: BoundedText): void {
  toolsText(body.tools, out);
  if (typeof body.instructions === "string") out.add(`<system>${body.instructions}\n`);
  const input = body.input;
  if (typeof input === "string") {
    out.add(`<user>${input}\n`);
    return;
  }
  if (!Array.isArray(input)) return;
  for (const item of input) {
    if (out.full) return;
    if (item === null || typeof item !== "object") continue;
    const { role, content, output, arguments: args } = item as Json;
    out.add(typeof role === "string" ? `<${role}>` : "<>");
    contentText(content, out);
    if (typeof output === "string") out.add(output);
    if (typeof args === "string") out.add(args);
    out.add("\n");
  }
}

/**
 * Tool definitions come first: chat templates render them before the conversation (vLLM's
 * examples/tool_chat_template_hermes.jinja opens the prompt with them; Llama 3.1's template puts
 * them in the system block or the first user turn), and vLLM (entrypoints/openai/serving_chat.py)
 * and SGLang (python/sglang/srt/entrypoints/openai/serving_chat.py, _process_messages) pass `tools`
 * to the template.
 * The JSON text stands in for each template's own rendering: it only has to be prefix-stable.
 */
function toolsText(tools: unknown, out: BoundedText): void {
  if (!Array.isArray(tools) || tools.length === 0) return;
  assertNestingWithin(tools, "tools");
  out.add("<tools>");
  for (const tool of tools) {
    if (out.full) return;
    out.add(JSON.stringify(tool) ?? "");
    out.add("\n");
  }
  out.add("</tools>\n");
}

function chatText(messages: unknown, out: BoundedText): void {
  if (!Array.isArray(messages)) return;
  for (const message of messages) {
    if (out.full) return;
    if (message === null || typeof message !== "object") continue;
    const { role, content, tool_calls: toolCalls } = message as Json;
    // The role marks message boundaries, as the chat template does for the engine.
    out.add(typeof role === "string" ? `<${role}>` : "<>");
    contentText(content, out);
    if (Array.isArray(toolCalls)) toolCallsText(toolCalls, out);
    out.add("\n");
  }
}

/**
 * A string, or OpenAI multi-part content: a digest of each media part (mediaDigest), then the
 * text parts in order. The digests come first because engines may put a message's images before
 * its text: vLLM, for a chat template that takes content as a string, puts every placeholder of
 * a message ahead of its text (vllm/entrypoints/chat_utils.py); templates that take the parts in
 * order put them in place. Digests first make the routing text diverge no later than either
 * engine's prompt: two messages with the same text and different images never share the text.
 */
function contentText(content: unknown, out: BoundedText): void {
  if (typeof content === "string") {
    out.add(content);
    return;
  }
  if (!Array.isArray(content)) return;
  for (const part of content) {
    if (out.full) return;
    const digest = mediaDigest(part);
    if (digest !== undefined) out.add(`${MEDIA_MARK}${digest}${MEDIA_MARK}`);
  }
  for (const part of content) {
    if (out.full) return;
    if (typeof part === "string") out.add(part);
    else if (part !== null && typeof part === "object" && typeof (part as Json).text === "string") {
      out.add((part as Json).text as string);
    }
  }
}

/** Brackets a media digest in the routing text; no text part a client sends holds it by chance. */
const MEDIA_MARK = "\u0000";

/** Media part type → the field holding its URL (or, for input_audio, its base64 data). */
const MEDIA_FIELDS: Readonly<Record<string, string>> = {
  image_url: "image_url",
  input_image: "image_url",
  video_url: "video_url",
  audio_url: "audio_url",
  input_audio: "input_audio",
};

/**
 * A stable digest of a media part (image, video, audio), or undefined when the part is not one.
 * The engines key their caches on the media's content: vLLM folds each item's hash
 * (vllm/multimodal/hasher.py MultiModalHasher) into the block hashes of the blocks it covers
 * (vllm/v1/core/kv_cache_utils.py generate_block_hash_extra_keys: `(identifier, offset)` per
 * item); SGLang writes a value derived from the item's hash into the placeholder token ids
 * (python/sglang/srt/managers/schedule_batch.py MultimodalDataItem.set_pad_value:
 * `pad_value = hash % (1 << 30)`; the model's pad_input_ids, mm_utils.py). The router cannot
 * compute those hashes (they hash decoded pixels), so it digests what it has: a `data:` URL's
 * payload, the URL string otherwise. The same image sent the same way keys the same; the
 * same image sent once inline and once by URL keys apart (a missed hit, never a false one).
 */
export function mediaDigest(part: unknown): string | undefined {
  if (!isMediaPart(part)) return undefined;
  const type = (part as Json).type as string;
  const value = (part as Json)[MEDIA_FIELDS[type] as string];
  let source: string | undefined;
  if (typeof value === "string") source = value;
  else if (value !== null && typeof value === "object") {
    const { url, data } = value as Json;
    source = typeof url === "string" ? url : typeof data === "string" ? data : undefined;
  }
  if (source === undefined) return undefined;
  const hash = createHash("sha256");
  hash.update(type);
  hash.update("\u0000");
  if (!hashDataUrlPayload(hash, source)) hash.update(source);
  return hash.digest("hex").slice(0, 24);
}

/** Characters of a `data:` URL's payload hashed at a time (a slice of it, never a copy of all). */
const PAYLOAD_WINDOW = 64 * 1024;

/**
 * Hashes a `data:` URL's payload as text, in windows; false when `url` is not one. A base64
 * payload is hashed without its line breaks, spaces and trailing padding, so the spellings of
 * the same bytes the engines' decoders accept key the same. It is not decoded: decoding allocated
 * a copy of every image of every request (tens of MB for a large one) only to hash it.
 */
function hashDataUrlPayload(hash: Hash, url: string): boolean {
  if (!url.startsWith("data:")) return false;
  const comma = url.indexOf(",");
  if (comma < 0) return false;
  const base64 = url.slice(0, comma).endsWith(";base64");
  let end = url.length;
  if (base64) {
    while (end > comma + 1 && (url[end - 1] === "=" || /\s/.test(url[end - 1] as string))) end--;
  }
  for (let at = comma + 1; at < end; at += PAYLOAD_WINDOW) {
    const piece = url.slice(at, Math.min(end, at + PAYLOAD_WINDOW));
    hash.update(base64 && /\s/.test(piece) ? piece.replace(/\s+/g, "") : piece);
  }
  return true;
}

/** Whether a chat message's content holds a media part. */
export function hasMedia(message: unknown): boolean {
  if (message === null || typeof message !== "object") return false;
  const { content } = message as Json;
  return Array.isArray(content) && content.some(isMediaPart);
}

function isMediaPart(part: unknown): boolean {
  if (part === null || typeof part !== "object") return false;
  const { type } = part as Json;
  return typeof type === "string" && Object.hasOwn(MEDIA_FIELDS, type);
}

function toolCallsText(calls: unknown[], out: BoundedText): void {
  for (const call of calls) {
    const fn = call !== null && typeof call === "object" ? (call as Json).function : undefined;
    if (fn !== null && typeof fn === "object") {
      const { name, arguments: args } = fn as Json;
      out.add(`${typeof name === "string" ? name : ""}(${typeof args === "string" ? args : ""})`);
    }
  }
}

/**
 * string | string[] | token ids | token-id batches. Ids end with "," so "1,2" never prefixes "1,23".
 * Iterative (an explicit stack of array cursors), so nesting depth is bounded by MAX_NESTING_DEPTH
 * and never by the call stack.
 */
function promptText(prompt: unknown, field: string, out: BoundedText): void {
  if (typeof prompt === "string") {
    out.add(prompt);
    return;
  }
  if (!Array.isArray(prompt)) return;
  const stack: Array<{ items: unknown[]; next: number }> = [{ items: prompt, next: 0 }];
  while (stack.length > 0 && !out.full) {
    const top = stack[stack.length - 1] as { items: unknown[]; next: number };
    if (top.next >= top.items.length) {
      stack.pop();
      // A nested batch ends with a newline, as a string item does.
      if (stack.length > 0) out.add("\n");
      continue;
    }
    const item = top.items[top.next++];
    if (typeof item === "string") out.add(`${item}\n`);
    else if (typeof item === "number") out.add(`${item},`);
    else if (Array.isArray(item)) {
      if (stack.length >= MAX_NESTING_DEPTH) throw tooDeep(field);
      stack.push({ items: item, next: 0 });
    }
  }
}

/**
 * Refuses a value nested deeper than MAX_NESTING_DEPTH before JSON.stringify recurses into it.
 * Engines take at most two levels of prompt arrays (token-id batches); a tool's JSON schema nests
 * a few levels.
 */
function assertNestingWithin(value: unknown, field: string): void {
  if (nestsDeeperThan(value)) throw tooDeep(field);
}

function tooDeep(field: string): RouterError {
  return new RouterError(
    "invalid_request",
    `"${field}" is nested deeper than ${MAX_NESTING_DEPTH} levels; no engine accepts that.`,
  );
}

export function modelOf(body: Json): string | undefined {
  const model = body.model;
  if (typeof model !== "string") return undefined;
  if (model.length > MAX_NAME_CHARS.model) throw nameTooLong("model", model.length, true);
  return model;
}

/**
 * SGLang's `lora_path` as one adapter key: the adapter of a single request, or of every item of a
 * batch (a list, one entry per item; null = the base model). A batch that mixes adapters gets a
 * key of its own (the list), so its text never claims a prefix one adapter computed for another.
 * SGLang takes it on /generate (io_struct.py GenerateReqInput.lora_path) and on the OpenAI routes
 * (serving_chat.py `_resolve_lora_path(request.model, request.lora_path)`). Anything else: none.
 */
export function adapterOf(body: Json): string | undefined {
  const path = body.lora_path;
  if (typeof path === "string") return path === "" ? undefined : boundedAdapter(path);
  if (!Array.isArray(path) || path.length === 0) return undefined;
  // Every name of the list is bounded, as the body's scan bounds them (MAX_NAME_CHARS).
  for (const p of path) if (typeof p === "string") boundedAdapter(p);
  const first: unknown = path[0];
  if (path.every((p) => p === first))
    return typeof first === "string" && first !== "" ? first : undefined;
  if (!path.every((p) => p === null || typeof p === "string")) return undefined;
  // A digest, not the list itself: the key roots a tree of the index, and a batch's list could
  // be thousands of names long.
  return `lora_path[${createHash("sha256").update(JSON.stringify(path)).digest("base64url")}]`;
}

/**
 * Adapter names longer than a path can be (Linux PATH_MAX; SGLang once took a path here, and
 * gives names no limit of its own) are refused: each distinct name roots a tree of the index.
 * The body's bytes are scanned for them as they arrive (read-body.ts, BodyReadLimits.boundedFields),
 * so a long name is refused before the rest of its body is kept or parsed; the parse checks again.
 */
export const MAX_ADAPTER_CHARS = 4096;

function boundedAdapter(name: string): string {
  if (name.length <= MAX_ADAPTER_CHARS) return name;
  throw nameTooLong("lora_path", name.length, true);
}

/**
 * The names a client picks that key the index (each distinct one roots a tree), bounded in
 * characters: SGLang's `lora_path`, and `model`, which is a served name (vLLM serves a model under
 * its path by default: at most PATH_MAX) or SGLang's `<base>:<adapter>`, so at most two of those.
 * The body's bytes are scanned for them as they arrive (intake.ts, BOUNDED_FIELDS).
 */
export const MAX_NAME_CHARS = {
  lora_path: MAX_ADAPTER_CHARS,
  model: 2 * MAX_ADAPTER_CHARS + 1,
} as const;

export type BoundedName = keyof typeof MAX_NAME_CHARS;

/** 400 for a name of `chars` characters: all of it (`whole`), or as far as it was read. */
export function nameTooLong(field: BoundedName, chars: number, whole: boolean): RouterError {
  const max = MAX_NAME_CHARS[field];
  const length = whole ? `of ${chars} characters` : `longer than ${max} characters`;
  const what = field === "lora_path" ? "an adapter" : "a model";
  return new RouterError(
    "invalid_request",
    `"${field}" names ${what} ${length}; at most ${max} are accepted.`,
  );
}
