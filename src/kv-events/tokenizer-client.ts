/**
 * Tokens for precise matching, from the worker's own tokenizer endpoint (POST /tokenize: vLLM
 * vllm/entrypoints/openai/api_server.py, answer `{count, max_model_len, tokens}`; SGLang
 * sglang/srt/entrypoints/http_server.py, same shape for `prompt`).
 *
 * Cached per prefix: a prompt string is reused up to its last cached line ("\n" boundary), and
 * only the rest is tokenized, so a growing conversation does not pay for its history twice
 * (tokenizers restart at line boundaries in practice, as the chat templates put special tokens
 * there). Chat messages are cached whole. The cache is an LRU bounded in entries and tokens.
 */
import { requestWorker, type WorkerTarget } from "../workers/worker-request.js";
import { isTokenId, type TokenizeInput } from "./tokenize-input.js";

export interface TokenizerClientOptions {
  /** Limit of one /tokenize call (the routing budget is separate: see HybridIndex.prepare). */
  requestTimeoutMs: number;
  /** Most tokens held by the cache, all entries together. */
  maxCachedTokens: number;
  /** Most tokens one answer may hold. */
  maxTokens: number;
}

/** Line boundaries looked at for a cached prefix, from the end. */
const MAX_PREFIX_PROBES = 64;

export class TokenizerClient {
  private readonly cache = new Map<string, readonly number[]>();
  private cachedTokens = 0;
  /** Calls under way, shared by concurrent requests for the same input. */
  private readonly inFlight = new Map<string, Promise<readonly number[] | undefined>>();
  failures = 0;

  constructor(private readonly options: TokenizerClientOptions) {}

  /** Tokens already known for the input, without a call. */
  cached(model: string | undefined, input: TokenizeInput): readonly number[] | undefined {
    if ("tokens" in input) return input.tokens;
    return this.cachedUnder(cacheKey(model, input));
  }

  /** The cached tokens under `key` (refreshing their recency), if any. */
  private cachedUnder(key: string): readonly number[] | undefined {
    const hit = this.cache.get(key);
    if (hit !== undefined) this.touch(key, hit);
    return hit;
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
    if (known !== undefined) return Promise.resolve(known);
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
    let tokens: readonly number[] | undefined;
    if ("prompt" in input) {
      const prefix = this.cachedLinePrefix(model, input.prompt);
      if (prefix !== undefined) {
        const rest = await this.call(target, model, {
          prompt: input.prompt.slice(prefix.length),
          add_special_tokens: false,
        });
        tokens = rest === undefined ? undefined : [...prefix.tokens, ...rest];
      } else {
        tokens = await this.call(target, model, { prompt: input.prompt });
      }
    } else if ("messages" in input) {
      tokens = await this.call(target, model, {
        messages: input.messages,
        add_generation_prompt: true,
      });
    }
    if (tokens !== undefined) this.touch(key, tokens);
    return tokens;
  }

  /** The longest cached prefix of `text` that ends a line. */
  private cachedLinePrefix(model: string | undefined, text: string) {
    let end = text.length - 1;
    for (let probes = 0; probes < MAX_PREFIX_PROBES; probes++) {
      const nl = text.lastIndexOf("\n", end - 1);
      if (nl < 0) return undefined;
      const prefix = text.slice(0, nl + 1);
      const tokens = this.cache.get(cacheKey(model, { prompt: prefix }));
      if (tokens !== undefined) return { length: prefix.length, tokens };
      end = nl;
    }
    return undefined;
  }

  private async call(
    target: WorkerTarget,
    model: string | undefined,
    fields: Record<string, unknown>,
  ): Promise<number[] | undefined> {
    try {
      const res = await requestWorker(target, "/tokenize", {
        method: "POST",
        json: model !== undefined ? { model, ...fields } : fields,
        timeoutMs: this.options.requestTimeoutMs,
      });
      if (res.statusCode !== 200) {
        await res.body.dump();
        this.failures++;
        return undefined;
      }
      const answer = (await res.body.json()) as { tokens?: unknown } | null;
      const tokens = answer?.tokens;
      if (
        !Array.isArray(tokens) ||
        tokens.length > this.options.maxTokens ||
        !tokens.every(isTokenId)
      ) {
        this.failures++;
        return undefined;
      }
      return tokens as number[];
    } catch {
      this.failures++;
      return undefined;
    }
  }

  private touch(key: string, tokens: readonly number[]): void {
    const old = this.cache.get(key);
    if (old !== undefined) {
      this.cache.delete(key);
      this.cachedTokens -= old.length;
    }
    if (tokens.length > this.options.maxCachedTokens) return;
    this.cache.set(key, tokens);
    this.cachedTokens += tokens.length;
    for (const [oldest, value] of this.cache) {
      if (this.cachedTokens <= this.options.maxCachedTokens) break;
      this.cache.delete(oldest);
      this.cachedTokens -= value.length;
    }
  }

  /** Tokens held by the cache (bounded by maxCachedTokens). */
  get size(): number {
    return this.cachedTokens;
  }
}

function cacheKey(model: string | undefined, input: TokenizeInput): string {
  const m = model ?? "";
  if ("prompt" in input) return `p\u0000${m}\u0000${input.prompt}`;
  if ("messages" in input) return `m\u0000${m}\u0000${JSON.stringify(input.messages)}`;
  return "";
}
