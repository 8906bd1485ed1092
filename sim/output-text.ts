/**
 * What the simulated model "generates": the same sentence, cut into 4-character tokens, forever.
 * Token i is characters [4i, 4i + 4) of the endlessly repeated sentence, so any output is
 * predictable, and the multi-turn workload can send back exactly the reply the engine produced
 * (its KV blocks are then cache hits, as with a real engine).
 */
import { CHARS_PER_TOKEN, tokenize } from "./tokenizer.js";

// No newline: the reply must stay one line for tokenize(generatedText(n)) to equal the ids below.
const SENTENCE = "The simulated engine writes these words again so every test can predict them. ";

/** Tokens after which the output repeats itself (the sentence length and 4 realign). */
const PERIOD_TOKENS = lcm(SENTENCE.length, CHARS_PER_TOKEN) / CHARS_PER_TOKEN;
const PERIOD_TEXT = SENTENCE.repeat((PERIOD_TOKENS * CHARS_PER_TOKEN) / SENTENCE.length);
const PERIOD_IDS = tokenize(PERIOD_TEXT);

export function generatedTokenText(index: number): string {
  const start = (index % PERIOD_TOKENS) * CHARS_PER_TOKEN;
  return PERIOD_TEXT.slice(start, start + CHARS_PER_TOKEN);
}

/** The text of the first `tokens` generated tokens (exactly 4 characters per token). */
export function generatedText(tokens: number): string {
  const whole = Math.floor(tokens / PERIOD_TOKENS);
  const rest = tokens % PERIOD_TOKENS;
  return PERIOD_TEXT.repeat(whole) + PERIOD_TEXT.slice(0, rest * CHARS_PER_TOKEN);
}

/** The ids of the first `tokens` generated tokens; equal to tokenize(generatedText(tokens)). */
export function generatedTokenIds(tokens: number): number[] {
  const ids = new Array<number>(tokens);
  for (let i = 0; i < tokens; i++) ids[i] = PERIOD_IDS[i % PERIOD_TOKENS] as number;
  return ids;
}

function lcm(a: number, b: number): number {
  let x = a;
  let y = b;
  while (y !== 0) [x, y] = [y, x % y];
  return (a / x) * b;
}
