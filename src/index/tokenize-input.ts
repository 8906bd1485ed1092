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
  | { readonly tokens: readonly number[] }
  | LeadingMessages;

/**
 * A chat with media (images, audio, video): only the messages before the first one that holds
 * media, tokenized without the generation prompt, and the share of the request's routing text
 * they stand for. The engines key the blocks from a media item on with the item's hash (vLLM's
 * block-hash extra keys, SGLang's pad values in the token ids), which the router cannot compute,
 * and /tokenize answers placeholder tokens that are the same for every image: matching on them
 * would claim blocks another image filled. So the precise match stops before the first media.
 */
export interface LeadingMessages {
  readonly leadingMessages: readonly unknown[];
  /** Characters of the routing text before the first media message, over all of them (0..1]. */
  readonly share: number;
}

/** A token id as engines send and take them: a non-negative integer. */
export function isTokenId(value: unknown): boolean {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}
