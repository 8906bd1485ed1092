import { isTokenId, type TokenizeInput } from "../index/tokenize-input.js";
import type { Endpoint } from "./routing-text.js";

type Json = Record<string, unknown>;

/**
 * The request as the engine's tokenizer takes it (index/tokenize-input.ts): chat messages, the
 * prompt or /generate's text, or the token ids the client sent; undefined for the rest.
 */
export function tokenizeInputOf(endpoint: Endpoint, body: Json): TokenizeInput | undefined {
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
