/**
 * The simulated engine's chat template: `<|role|>\ncontent\n` per message, then `<|assistant|>\n`
 * as the generation prompt. Every message ends with a newline, so (with the stand-in tokenizer) a
 * longer conversation re-tokenizes its earlier turns to the same ids, as real templates do.
 */

export interface ChatMessage {
  role: string;
  content: string;
}

const GENERATION_PROMPT = "<|assistant|>\n";

export function renderChat(messages: readonly ChatMessage[], addGenerationPrompt = true): string {
  let out = "";
  for (const m of messages) out += `<|${m.role}|>\n${m.content}\n`;
  return addGenerationPrompt ? out + GENERATION_PROMPT : out;
}
