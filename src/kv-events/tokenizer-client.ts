/**
 * Tokens for precise matching, from the worker's own tokenizer endpoint (POST /tokenize: vLLM
 * vllm/entrypoints/openai/api_server.py, answer `{count, max_model_len, tokens}`; SGLang
 * sglang/srt/entrypoints/http_server.py, same shape for `prompt`).
 *
 * Cached per prefix: a prompt string is reused up to its last cached line ("\n" boundary), and
 * only the rest is tokenized, so a growing conversation does not pay for its history twice
 * (tokenizers restart at line boundaries in practice, as the chat templates put special tokens
 * there). Chat messages are cached whole and by message prefix (chat-prefix.ts): an earlier turn
 * of the conversation, and the leading system messages, tokenized once on their own in the
 * background; `knownPrefix` answers the longest one cached, for a request whose own tokens come
 * too late. The cache is an LRU bounded in tokens. A prompt found
 * longer than maxTokens is remembered as such (`TooLong`), so a repeat is neither encoded nor sent
 * again.
 *
 * With a local tokenizer (--tokenizer-path, local-tokenizer.ts) prompt strings are tokenized in
 * this process instead, synchronously, through the same cache: a prompt is cut at its last line
 * boundary and the head is cached on its own, so requests that share a first part (a system
 * prompt, a conversation's history) encode only what follows it.
 */

import { splitSalted } from "../index/salted-key.js";
import { isTokenId, type TokenizeInput } from "../index/tokenize-input.js";
import { requestWorker, type WorkerTarget } from "../workers/worker-request.js";
import { chatKey, chatPrefixProbes, leadingKey, systemPrefixOf } from "./chat-prefix.js";
import type { LocalTokenizer } from "./local-tokenizer.js";

export interface TokenizerClientOptions {
  /** Limit of one /tokenize call (the routing budget is separate: see HybridIndex.prepare). */
  requestTimeoutMs: number;
  /** Most tokens held by the cache, all entries together. */
  maxCachedTokens: number;
  /** Most tokens one answer may hold. */
  maxTokens: number;
  /** Tokenizes prompt strings here instead of calling the worker (--tokenizer-path). */
  local?: LocalTokenizer | undefined;
}

/** Line boundaries looked at for a cached prefix, from the end. */
const MAX_PREFIX_PROBES = 64;

/**
 * The cache's note that an input has more than maxTokens tokens. It costs the cache's bound what
 * its tokens would have (its key, a copy of the prompt, is as large as theirs would be), so a
 * note larger than the whole bound is not kept, as such tokens would not be.
 */
class TooLong {
  constructor(readonly tokens: number) {}
}

/** What the cache holds for an input: its tokens, or that there are too many. */
type Entry = readonly number[] | TooLong;

function costOf(entry: Entry): number {
  return entry instanceof TooLong ? entry.tokens : entry.length;
}

/** The entry's tokens; undefined for a TooLong (or no entry). */
function tokensOf(entry: Entry | undefined): readonly number[] | undefined {
  return entry instanceof TooLong ? undefined : entry;
}

export class TokenizerClient {
  private readonly cache = new Map<string, Entry>();
  private cachedTokens = 0;
  /** Calls under way, shared by concurrent requests for the same input. */
  private readonly inFlight = new Map<string, Promise<readonly number[] | undefined>>();
  failures = 0;

  constructor(private readonly options: TokenizerClientOptions) {}

  /** Tokens already known for the input, without a call and without computing them. */
  cached(model: string | undefined, input: TokenizeInput): readonly number[] | undefined {
    if ("tokens" in input) return input.tokens;
    return tokensOf(this.cachedUnder(cacheKey(model, input)));
  }

  /**
   * Tokens known without a call to a worker: given, cached, or computed here with the local
   * tokenizer (`computed`). The cache key, a copy of the whole prompt, is built once.
   */
  known(
    model: string | undefined,
    input: TokenizeInput,
  ): { tokens: readonly number[]; computed: boolean } | undefined {
    if ("tokens" in input) return { tokens: input.tokens, computed: false };
    const key = cacheKey(model, input);
    const hit = this.cachedUnder(key);
    if (hit instanceof TooLong) return undefined;
    if (hit !== undefined) return { tokens: hit, computed: false };
    const tokens = this.encodeLocally(model, input, key);
    return tokens === undefined ? undefined : { tokens, computed: true };
  }

  /**
   * Tokens of the longest cached prefix of the input, and the share of its characters that prefix
   * covers: a prompt's first lines; a chat's earlier turn or its leading system messages.
   */
  knownPrefix(
    model: string | undefined,
    input: TokenizeInput,
  ): { tokens: readonly number[]; fraction: number } | undefined {
    if ("prompt" in input) {
      const prefix = this.cachedLinePrefix(model, input.prompt);
      if (prefix === undefined) return undefined;
      return { tokens: prefix.tokens, fraction: prefix.length / input.prompt.length };
    }
    if (!("messages" in input)) return undefined;
    const { probes, totalChars } = chatPrefixProbes(model, input.messages);
    for (const probe of probes) {
      const tokens = tokensOf(this.cachedUnder(probe.key));
      if (tokens !== undefined) return { tokens, fraction: probe.chars / totalChars };
    }
    return undefined;
  }

  /** The cache's entry under `key` (refreshing its recency), if any. */
  private cachedUnder(key: string): Entry | undefined {
    const hit = this.cache.get(key);
    if (hit !== undefined) this.touch(key, hit);
    return hit;
  }

  /**
   * With a local tokenizer, a prompt string's tokens, computed here (cached under `key` and per
   * line prefix); undefined without one, for chat messages (the engine's chat template is not run
   * here), or past maxTokens.
   */
  private encodeLocally(
    model: string | undefined,
    input: TokenizeInput,
    key: string,
  ): readonly number[] | undefined {
    const local = this.options.local;
    if (local === undefined || !("prompt" in input)) return undefined;
    const prompt = input.prompt;
    let tokens: number[];
    const prefix = this.cachedLinePrefix(model, prompt);
    if (prefix !== undefined) {
      tokens = [...prefix.tokens, ...local.encode(prompt.slice(prefix.length), false)];
    } else {
      const cut = lastLineBoundary(prompt, prompt.length);
      if (cut > 0) {
        const head = local.encode(prompt.slice(0, cut), true);
        this.touch(cacheKey(model, { prompt: prompt.slice(0, cut) }), head);
        tokens = [...head, ...local.encode(prompt.slice(cut), false)];
      } else {
        tokens = local.encode(prompt, true);
      }
    }
    if (tokens.length > this.options.maxTokens) {
      this.touch(key, new TooLong(tokens.length));
      return undefined;
    }
    this.touch(key, tokens);
    return tokens;
  }

  /** Tokens for the input, from the cache or the worker; undefined when the worker does not answer. */
  tokenize(
    target: WorkerTarget,
    model: string | undefined,
    input: TokenizeInput,
  ): Promise<readonly number[] | undefined> {
    if ("tokens" in input) return Promise.resolve(input.tokens);
    // One key per request: for a chat it serialises the whole conversation.
    const key = cacheKey(model, input);
    const known = this.cachedUnder(key);
    if (known !== undefined) return Promise.resolve(tokensOf(known));
    let call = this.inFlight.get(key);
    if (call === undefined) {
      call = this.fetchTokens(target, model, input, key).finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, call);
    }
    return call;
  }

  private async fetchTokens(
    target: WorkerTarget,
    model: string | undefined,
    input: TokenizeInput,
    key: string,
  ): Promise<readonly number[] | undefined> {
    let tokens: Entry | undefined;
    if ("prompt" in input) {
      const prefix = this.cachedLinePrefix(model, input.prompt);
      if (prefix !== undefined) {
        const rest = await this.call(target, model, {
          prompt: input.prompt.slice(prefix.length),
          add_special_tokens: false,
        });
        tokens =
          rest === undefined
            ? undefined
            : rest instanceof TooLong
              ? new TooLong(prefix.tokens.length + rest.tokens)
              : [...prefix.tokens, ...rest];
      } else {
        tokens = await this.call(target, model, { prompt: input.prompt });
      }
    } else if ("messages" in input) {
      this.learnSystemPrefix(target, model, input.messages);
      tokens = await this.call(target, model, {
        messages: input.messages,
        add_generation_prompt: true,
      });
    } else if ("leadingMessages" in input) {
      tokens = await this.call(target, model, {
        messages: input.leadingMessages,
        add_generation_prompt: false,
      });
    }
    if (tokens !== undefined) this.touch(key, tokens);
    return tokensOf(tokens);
  }

  /**
   * Tokenizes the chat's leading system messages on their own (no generation prompt), once, in
   * the background: every new question after the same system prompt starts with these tokens.
   */
  private learnSystemPrefix(
    target: WorkerTarget,
    model: string | undefined,
    messages: readonly unknown[],
  ): void {
    const prefix = systemPrefixOf(model, messages);
    if (prefix === undefined || this.cache.has(prefix.key) || this.inFlight.has(prefix.key)) return;
    const call = this.call(target, model, {
      messages: prefix.messages,
      add_generation_prompt: false,
    })
      .then((tokens) => {
        if (tokens !== undefined) this.touch(prefix.key, tokens);
        return tokensOf(tokens);
      })
      .finally(() => this.inFlight.delete(prefix.key));
    this.inFlight.set(prefix.key, call);
  }

  /** The longest cached prefix of `text` that ends at a line boundary. */
  private cachedLinePrefix(model: string | undefined, text: string) {
    let end = text.length;
    for (let probes = 0; probes < MAX_PREFIX_PROBES; probes++) {
      const cut = lastLineBoundary(text, end);
      if (cut <= 0) return undefined;
      const prefix = text.slice(0, cut);
      const tokens = tokensOf(this.cache.get(cacheKey(model, { prompt: prefix })));
      if (tokens !== undefined) return { length: prefix.length, tokens };
      end = cut - 1;
      if (end <= 0) return undefined;
    }
    return undefined;
  }

  private async call(
    target: WorkerTarget,
    model: string | undefined,
    fields: Record<string, unknown>,
  ): Promise<number[] | TooLong | undefined> {
    // The cache stays keyed by the salted key (a tenant's cached tokens would answer faster for
    // another tenant's prompt); the engine is asked for its own model's tokens.
    const served = splitSalted(model).key;
    try {
      const res = await requestWorker(target, "/tokenize", {
        method: "POST",
        json: served !== undefined ? { model: served, ...fields } : fields,
        timeoutMs: this.options.requestTimeoutMs,
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        this.failures++;
        return undefined;
      }
      const answer = (await res.body.json()) as { tokens?: unknown } | null;
      const tokens = answer?.tokens;
      if (!Array.isArray(tokens)) {
        this.failures++;
        return undefined;
      }
      if (tokens.length > this.options.maxTokens) {
        this.failures++;
        return new TooLong(tokens.length);
      }
      if (!tokens.every(isTokenId)) {
        this.failures++;
        return undefined;
      }
      return tokens as number[];
    } catch {
      this.failures++;
      return undefined;
    }
  }

  private touch(key: string, entry: Entry): void {
    const old = this.cache.get(key);
    if (old !== undefined) {
      this.cache.delete(key);
      this.cachedTokens -= costOf(old);
    }
    const cost = costOf(entry);
    if (cost > this.options.maxCachedTokens) return;
    this.cache.set(key, entry);
    this.cachedTokens += cost;
    for (const [oldest, value] of this.cache) {
      if (this.cachedTokens <= this.options.maxCachedTokens) break;
      this.cache.delete(oldest);
      this.cachedTokens -= costOf(value);
    }
  }

  /** Tokens held by the cache, TooLong notes counted as their tokens (bounded by maxCachedTokens). */
  get size(): number {
    return this.cachedTokens;
  }
}

function cacheKey(model: string | undefined, input: TokenizeInput): string {
  const m = model ?? "";
  if ("prompt" in input) return `p\u0000${m}\u0000${input.prompt}`;
  if ("messages" in input) return chatKey(model, input.messages);
  if ("leadingMessages" in input) return leadingKey(model, input.leadingMessages);
  return "";
}

/**
 * The end of the last line of `text` before `end` (just after its "\n") that text without
 * leading whitespace follows, or -1: there the tokenizers' pre-tokenizers split, so the tokens of
 * the two sides put together are the tokens of the whole (a newline followed by more whitespace
 * may merge with it into one token).
 */
function lastLineBoundary(text: string, end: number): number {
  let nl = text.lastIndexOf("\n", end - 1);
  while (nl >= 0) {
    const next = text.charCodeAt(nl + 1);
    // Not at the very end (nothing would follow), and not followed by whitespace.
    if (nl + 1 < text.length && next !== 32 && next !== 9 && next !== 10 && next !== 13) {
      return nl + 1;
    }
    // lastIndexOf clamps a negative start to 0: stop at the first character.
    nl = nl === 0 ? -1 : text.lastIndexOf("\n", nl - 1);
  }
  return -1;
}
