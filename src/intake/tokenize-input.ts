import { isTokenId, type TokenizeInput } from "../index/tokenize-input.js";
import { type Endpoint, hasMedia, routingText } from "./routing-text.js";

type Json = Record<string, unknown>;

/**
 * The request as the engine's tokenizer takes it (index/tokenize-input.ts): chat messages, the
 * prompt or /generate's text, or the token ids the client sent; undefined for the rest.
 */
export function tokenizeInputOf(
  endpoint: Endpoint,
  body: Json,
  text = "",
): TokenizeInput | undefined {
  switch (endpoint) {
    case "chat":
      return Array.isArray(body.messages) ? chatInput(body, body.messages, text) : undefined;
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

/**
 * The whole chat, or for a chat with media the messages before the first media message
 * (LeadingMessages), with the share of the routing text `text` they stand for; undefined when
 * the first message already holds media (nothing before it to match precisely).
 */
function chatInput(body: Json, messages: unknown[], text: string): TokenizeInput | undefined {
  const first = messages.findIndex(hasMedia);
  if (first < 0) return { messages };
  if (first === 0 || text.length === 0) return undefined;
  const leadingMessages = messages.slice(0, first);
  const head = routingText("chat", { tools: body.tools, messages: leadingMessages }, text.length);
  return { leadingMessages, share: Math.min(1, head.length / text.length) };
}
