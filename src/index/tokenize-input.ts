/**
 * What the engine will tokenize for a request, in the form its /tokenize endpoint takes it
 * (vLLM vllm/entrypoints/openai/protocol.py: TokenizeCompletionRequest `prompt`,
 * TokenizeChatRequest `messages`; SGLang's /tokenize takes `prompt`), or token ids the client
 * already sent. Undefined when the request has nothing a tokenizer can take (embeddings, batches).
 * Built from a request body by intake/tokenize-input.ts; the indexes and kv-events read it.
 */
export type TokenizeInput =
  | { readonly prompt: string }
  | { readonly messages: readonly unknown[] }
  | { readonly tokens: readonly number[] };

/** A token id as engines send and take them: a non-negative integer. */
export function isTokenId(value: unknown): boolean {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}
