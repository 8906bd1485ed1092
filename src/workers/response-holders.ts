/**
 * Which worker produced each Responses API response this router relayed. vLLM and SGLang keep
 * their responses in the engine's own memory (vllm/entrypoints/openai/responses/serving.py
 * `response_store`; python/sglang/srt/entrypoints/openai/serving_responses.py, its copy), so a
 * request continuing one with `previous_response_id` can only be served by that worker.
 *
 * Bounded (--max-response-ids: the oldest id goes first) and aged (--response-id-ttl-secs: an
 * entry older than that is forgotten when read), so it never grows with traffic.
 */
export class ResponseHolders {
  /** id → holder, in insertion order (a Map iterates oldest first). */
  private readonly held = new Map<string, { worker: string; at: number }>();

  constructor(
    private readonly maxEntries: number,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get size(): number {
    return this.held.size;
  }

  /** The worker produced the response `id`. */
  record(id: string, workerId: string): void {
    if (this.maxEntries <= 0) return;
    this.held.delete(id);
    this.held.set(id, { worker: workerId, at: this.now() });
    while (this.held.size > this.maxEntries) {
      const oldest = this.held.keys().next().value as string;
      this.held.delete(oldest);
    }
  }

  /** The worker that produced `id`, while remembered; undefined when unknown or expired. */
  holder(id: string): string | undefined {
    const entry = this.held.get(id);
    if (entry === undefined) return undefined;
    if (this.now() - entry.at > this.ttlMs) {
      this.held.delete(id);
      return undefined;
    }
    return entry.worker;
  }
}

/** Bytes of an answer searched for its response id: the engines send it first. */
const SNIFF_BYTES = 8192;
/** What an engine's response id looks like (vLLM and SGLang: `resp_` and a uuid's hex). */
const ID = "resp[A-Za-z0-9_.:-]{1,200}";
const RESPONSE_ID = new RegExp(`"id"\\s*:\\s*"(${ID})"`);
const WHOLE_ID = new RegExp(`^${ID}$`);

/** Whether `text` is a response id in the engines' shape (one a replica reports, say). */
export function isResponseId(text: string): boolean {
  return WHOLE_ID.test(text);
}

/**
 * Finds a Responses answer's id in its first bytes as they go by, without holding any back: the
 * `id` of the response object, first in a JSON answer (vLLM's ResponsesResponse) and in a
 * stream's first event (`response.created`, whose `response.id` comes first).
 */
export class ResponseIdSniffer {
  private seen = "";
  private done = false;

  /** Looks at one chunk; returns the id the first time it is complete. */
  write(chunk: Uint8Array): string | undefined {
    if (this.done) return undefined;
    const room = SNIFF_BYTES - this.seen.length;
    this.seen += Buffer.from(
      chunk.buffer,
      chunk.byteOffset,
      Math.min(room, chunk.byteLength),
    ).toString("latin1");
    const match = RESPONSE_ID.exec(this.seen);
    if (match !== null || this.seen.length >= SNIFF_BYTES) {
      this.done = true;
      this.seen = "";
    }
    return match?.[1];
  }
}
