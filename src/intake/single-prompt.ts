import type { Endpoint } from "./routing-text.js";

type Json = Record<string, unknown>;

/**
 * Whether a request carries one prompt, so the usage its engine reports is about its routing text:
 * a batch (a list of prompts, SGLang /generate with a list of texts) reports per prompt or summed,
 * which says nothing reliable about one text's tokens or cached prefix. Chat is one prompt; `n`
 * choices count the prompt once (vLLM and SGLang alike).
 */
export function isSinglePrompt(endpoint: Endpoint, body: Json): boolean {
  switch (endpoint) {
    case "chat":
      return true;
    case "completions":
      return single(body.prompt);
    case "generate":
      return body.text !== undefined ? typeof body.text === "string" : single(body.input_ids);
    case "embeddings":
      return single(body.input);
    // A response may continue an earlier one (previous_response_id) that the text does not hold;
    // the pooling routes score several texts; tokenize prefills nothing.
    default:
      return false;
  }
}

/** A string, a list of token ids, or a list holding exactly one of those. */
function single(prompt: unknown): boolean {
  if (typeof prompt === "string") return true;
  if (!Array.isArray(prompt)) return false;
  if (prompt.every((item) => typeof item === "number")) return true;
  return prompt.length === 1 && (typeof prompt[0] === "string" || Array.isArray(prompt[0]));
}
