/**
 * The requests of bench:overhead and bench:overhead-ab: chat completions of 16 output tokens over
 * 64 distinct seeded prompts of one size, cycled (so the worker's KV cache and the router's index
 * hold them all after the warm-up).
 */
import { mulberry32 } from "../../src/sim/prng.js";
import { randomText } from "../../src/sim/workloads.js";
import type { LoadJob } from "./load.js";

export const DISTINCT_PROMPTS = 64;
export const OUTPUT_TOKENS = 16;

/** DISTINCT_PROMPTS seeded prompts of exactly `chars` characters. */
export function overheadPrompts(chars: number, seed = chars): string[] {
  const rng = mulberry32(seed);
  return Array.from({ length: DISTINCT_PROMPTS }, (_, i) =>
    `#${i} ${randomText(rng, Math.ceil(chars / 4))}`.slice(0, chars),
  );
}

/** `n` chat requests to `origin` cycling over `texts`, streamed or not. */
export function overheadJobs(
  origin: string,
  texts: readonly string[],
  stream: boolean,
  n: number,
): LoadJob[] {
  return Array.from({ length: n }, (_, i) => ({
    key: String(i),
    request: {
      origin,
      path: "/v1/chat/completions",
      body: JSON.stringify({
        messages: [{ role: "user", content: texts[i % texts.length] }],
        max_tokens: OUTPUT_TOKENS,
        ...(stream ? { stream: true } : {}),
      }),
      stream,
    },
  }));
}
