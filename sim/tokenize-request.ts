/**
 * What POST /tokenize tokenizes: vLLM's TokenizeCompletionRequest `{prompt}` or TokenizeChatRequest
 * `{messages}` (vllm/entrypoints/openai/protocol.py), with the same template the engine prefills.
 */
import type { SimTokenize } from "./protocol.js";
import { imageParts } from "./protocol.js";
import { renderChat } from "./template.js";

export function tokenizeBody(encode: SimTokenize, json: unknown): number[] | undefined {
  const body = json as Record<string, unknown> | null;
  let text: string;
  // vLLM's defaults: special tokens for a prompt, none for a rendered chat (protocol.ts).
  let addSpecialTokens: boolean;
  if (typeof body?.prompt === "string") {
    text = body.prompt;
    addSpecialTokens = body.add_special_tokens !== false;
  } else if (Array.isArray(body?.messages)) {
    addSpecialTokens = body.add_special_tokens === true;
    const messages = body.messages.map((m: unknown) => {
      const { role, content } = (m ?? {}) as Record<string, unknown>;
      // Images as placeholders the same for every image: the engines' tokenizers do not key
      // them; their caches do (media.ts).
      const text =
        typeof content === "string"
          ? content
          : Array.isArray(content)
            ? imageParts(content, false) + textOf(content)
            : "";
      return { role: String(role), content: text };
    });
    text = renderChat(messages, body.add_generation_prompt !== false);
  } else {
    return undefined;
  }
  return encode(text, addSpecialTokens);
}

/** Text parts of multi-part content, joined by newlines (as the prompt joins them). */
function textOf(parts: unknown[]): string {
  const texts: string[] = [];
  for (const part of parts) {
    const text = (part as Record<string, unknown> | null)?.text;
    if (typeof text === "string" && (part as Record<string, unknown>).type === "text")
      texts.push(text);
  }
  return texts.join("\n");
}
