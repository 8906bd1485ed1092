import type { PromptUsage } from "../scheduling/usage-feedback.js";
/**
 * Reads the engine's token accounting from a response body while it passes through, without
 * holding back a byte: the relay pipes the body to the client, the tap only looks at each chunk.
 *
 * It recognises two keys wherever they occur, in a JSON body or in SSE `data:` lines:
 * - `"prompt_tokens": N`: OpenAI `usage.prompt_tokens` (vLLM and SGLang; in a stream, the final
 *   chunk when `stream_options.include_usage` is set) and SGLang `meta_info.prompt_tokens`
 *   (/generate, every streamed chunk). vLLM: vllm/entrypoints/openai/protocol.py (UsageInfo);
 *   SGLang: python/sglang/srt/managers/tokenizer_manager.py (meta_info).
 * - `"cached_tokens": N`: OpenAI `usage.prompt_tokens_details.cached_tokens` (vLLM with
 *   --enable-prompt-tokens-details, SGLang with --enable-cache-report:
 *   python/sglang/srt/entrypoints/openai/usage_processor.py) and SGLang `meta_info.cached_tokens`
 *   (always).
 * - `"completion_tokens": N`: OpenAI `usage.completion_tokens` (the same places as prompt_tokens)
 *   and SGLang `meta_info.completion_tokens` (tokenizer_manager.py, _handle_batch_output): what
 *   a per-tenant quota charges for the output (quotas/quota-step.ts).
 * The last value seen wins: streams repeat them per chunk, and the final chunk carries the totals.
 *
 * Matching raw bytes is safe: inside a JSON string every `"` is escaped, so the quoted key
 * followed by a colon can only be a real key. `"prompt_tokens_details"` does not match
 * `"prompt_tokens"` (the closing quote must follow). A `null` value is ignored.
 */
import { isJsonSpace } from "./json-field.js";

const PROMPT_KEY = Buffer.from('"prompt_tokens"');
const CACHED_KEY = Buffer.from('"cached_tokens"');
const COMPLETION_KEY = Buffer.from('"completion_tokens"');
/**
 * What every key ends with, and the length of the longest key and of what comes before its end
 * (`"completion`): a jump back that far from an ending finds the quote of any key.
 */
const KEY_END = Buffer.from('_tokens"');
const KEY_START_LENGTH = COMPLETION_KEY.length - KEY_END.length;
const KEY_LENGTH = COMPLETION_KEY.length;
const QUOTE = 0x22;
const COLON = 0x3a;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
/** Longest number read: a larger one is not a token count (and would lose precision). */
const MAX_DIGITS = 12;

/** What the engine reported about one request's prompt. */
export interface ReportedUsage extends PromptUsage {
  /** Tokens generated; undefined when not reported (an OpenAI stream without include_usage). */
  completionTokens?: number | undefined;
}

enum Phase {
  /** Looking for a key. */
  Key,
  /** After a key: whitespace, then a colon. */
  Colon,
  /** After the colon: whitespace, then digits. */
  Value,
  /** Reading digits. */
  Digits,
}

type Target = "prompt" | "cached" | "completion";

export class UsageTap {
  private promptTokens: number | undefined;
  private cachedTokens: number | undefined;
  private completionTokens: number | undefined;
  /** Bytes of each key matched so far. */
  private promptAt = 0;
  private cachedAt = 0;
  private completionAt = 0;
  private phase = Phase.Key;
  /** Which key the value being read belongs to. */
  private target: Target = "prompt";
  private value = 0;
  private digits = 0;

  /** Looks at one chunk of the body; never keeps it. */
  write(chunk: Uint8Array): void {
    const bytes = Buffer.isBuffer(chunk)
      ? chunk
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const end = bytes.length;
    // Keys that start this far from the end may run past it: those bytes go byte by byte.
    const tail = end - KEY_LENGTH;
    let i = 0;
    while (i < end) {
      if (
        this.phase === Phase.Key &&
        this.promptAt === 0 &&
        this.cachedAt === 0 &&
        this.completionAt === 0
      ) {
        // Between matches: jump to the next place a whole key can be, found by the ending both
        // keys share (one native search over the chunk, instead of a step at every quote of the
        // JSON). A key whose end is not in this chunk can only start in its last bytes.
        if (i < tail) {
          const at = bytes.indexOf(KEY_END, i);
          i = at === -1 ? tail : Math.max(i, at - KEY_START_LENGTH);
        }
        // Only a quote can start a key.
        i = bytes.indexOf(QUOTE, i);
        if (i === -1) return;
      }
      this.step(bytes[i]!);
      i++;
    }
  }

  /** What was reported, once the body ended; undefined when no prompt token count was seen. */
  result(): ReportedUsage | undefined {
    this.endNumber();
    if (this.promptTokens === undefined) return undefined;
    return {
      promptTokens: this.promptTokens,
      cachedTokens: this.cachedTokens,
      completionTokens: this.completionTokens,
    };
  }

  private step(byte: number): void {
    switch (this.phase) {
      case Phase.Key:
        this.promptAt = advance(PROMPT_KEY, this.promptAt, byte);
        this.cachedAt = advance(CACHED_KEY, this.cachedAt, byte);
        this.completionAt = advance(COMPLETION_KEY, this.completionAt, byte);
        if (this.promptAt === PROMPT_KEY.length) this.keyFound("prompt");
        else if (this.cachedAt === CACHED_KEY.length) this.keyFound("cached");
        else if (this.completionAt === COMPLETION_KEY.length) this.keyFound("completion");
        return;
      case Phase.Colon:
        if (byte === COLON) this.phase = Phase.Value;
        else if (!isJsonSpace(byte)) this.reset(byte);
        return;
      case Phase.Value:
        if (byte >= ZERO && byte <= NINE) {
          this.phase = Phase.Digits;
          this.value = byte - ZERO;
          this.digits = 1;
        } else if (!isJsonSpace(byte)) this.reset(byte);
        return;
      case Phase.Digits:
        if (byte >= ZERO && byte <= NINE) {
          this.value = this.value * 10 + (byte - ZERO);
          this.digits += 1;
          if (this.digits > MAX_DIGITS) this.reset(byte);
          return;
        }
        // A fraction or an exponent is not a token count: drop it.
        if (byte !== DOT && byte !== 0x65 && byte !== 0x45) this.endNumber();
        this.reset(byte);
        return;
    }
  }

  private keyFound(target: Target): void {
    this.target = target;
    this.phase = Phase.Colon;
    this.promptAt = 0;
    this.cachedAt = 0;
    this.completionAt = 0;
  }

  /** Stores the number being read, if any (a body may end right after it). */
  private endNumber(): void {
    if (this.phase !== Phase.Digits) return;
    if (this.target === "prompt") this.promptTokens = this.value;
    else if (this.target === "cached") this.cachedTokens = this.value;
    else this.completionTokens = this.value;
    this.phase = Phase.Key;
  }

  /** Back to looking for a key; the byte that ended the match may start the next one. */
  private reset(byte: number): void {
    this.phase = Phase.Key;
    this.digits = 0;
    this.promptAt = byte === QUOTE ? 1 : 0;
    this.cachedAt = byte === QUOTE ? 1 : 0;
    this.completionAt = byte === QUOTE ? 1 : 0;
  }
}

/** Next matched length of `key` after `byte` (a key's only quote that can restart it is its first). */
function advance(key: Buffer, at: number, byte: number): number {
  if (key[at] === byte) return at + 1;
  return byte === QUOTE ? 1 : 0;
}
