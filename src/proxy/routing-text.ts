/**
 * The text an engine will prefill for a request, per endpoint. It only has to be prefix-stable:
 * two requests whose prompts share a prefix must produce routing texts that share a prefix.
 * Every message counts (not just the first), so multi-turn chats keep their cache affinity.
 * Anything malformed contributes nothing; the worker, not the router, validates the request.
 */
export type Endpoint = "chat" | "completions" | "generate" | "embeddings";

type Json = Record<string, unknown>;

export function routingText(endpoint: Endpoint, body: Json): string {
  switch (endpoint) {
    case "chat":
      return chatText(body.messages);
    case "completions":
      return promptText(body.prompt);
    case "generate":
      return body.text !== undefined ? promptText(body.text) : promptText(body.input_ids);
    case "embeddings":
      return promptText(body.input);
  }
}

function chatText(messages: unknown): string {
  if (!Array.isArray(messages)) return "";
  let out = "";
  for (const message of messages) {
    if (message === null || typeof message !== "object") continue;
    const { role, content, tool_calls: toolCalls } = message as Json;
    // The role marks message boundaries, as the chat template does for the engine.
    out += typeof role === "string" ? `<${role}>` : "<>";
    out += contentText(content);
    if (Array.isArray(toolCalls)) out += toolCallsText(toolCalls);
    out += "\n";
  }
  return out;
}

/** A string, or OpenAI multi-part content: the text parts in order. */
function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let out = "";
  for (const part of content) {
    if (typeof part === "string") out += part;
    else if (part !== null && typeof part === "object" && typeof (part as Json).text === "string") {
      out += (part as Json).text as string;
    }
  }
  return out;
}

function toolCallsText(calls: unknown[]): string {
  let out = "";
  for (const call of calls) {
    const fn = call !== null && typeof call === "object" ? (call as Json).function : undefined;
    if (fn !== null && typeof fn === "object") {
      const { name, arguments: args } = fn as Json;
      out += `${typeof name === "string" ? name : ""}(${typeof args === "string" ? args : ""})`;
    }
  }
  return out;
}

/** string | string[] | token ids | token-id batches. Ids end with "," so "1,2" never prefixes "1,23". */
function promptText(prompt: unknown): string {
  if (typeof prompt === "string") return prompt;
  if (!Array.isArray(prompt)) return "";
  let out = "";
  for (const item of prompt) {
    if (typeof item === "string") out += `${item}\n`;
    else if (typeof item === "number") out += `${item},`;
    else if (Array.isArray(item)) out += `${promptText(item)}\n`;
  }
  return out;
}

export function modelOf(body: Json): string | undefined {
  return typeof body.model === "string" ? body.model : undefined;
}
