/**
 * What the engine will tokenize for a request, in the form its /tokenize endpoint takes it
 * (vLLM vllm/entrypoints/openai/protocol.py: TokenizeCompletionRequest `prompt`,
 * TokenizeChatRequest `messages`; SGLang's /tokenize takes `prompt`), or token ids the client
 * already sent. Undefined when the request has nothing a tokenizer can take (embeddings, batches).
 */
export type TokenizeInput =
  | { readonly prompt: string }
  | { readonly messages: readonly unknown[] }
  | { readonly tokens: readonly number[] };

type Json = Record<string, unknown>;

export function tokenizeInputOf(endpoint: string, body: Json): TokenizeInput | undefined {
  switch (endpoint) {
    case "chat":
      return Array.isArray(body.messages) ? { messages: body.messages } : undefined;
    case "completions":
      return promptInput(body.prompt);
    case "generate":
      return body.text !== undefined ? promptInput(body.text) : promptInput(body.input_ids);
    default:
      return undefined;
  }
}

function promptInput(prompt: unknown): TokenizeInput | undefined {
  if (typeof prompt === "string") return { prompt };
  if (Array.isArray(prompt) && prompt.length > 0 && prompt.every(isTokenId)) {
    return { tokens: prompt as number[] };
  }
  return undefined;
}

/** A token id as engines send and take them: a non-negative integer. */
export function isTokenId(value: unknown): boolean {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}
