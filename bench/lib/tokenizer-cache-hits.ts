/**
 * bench:kv-events section 4: how often the tokenizer cache knows a chat request's tokens, whole or
 * a prefix, before the worker's /tokenize answers (issue 20, item 9).
 *
 * A seeded multi-tenant chat workload: SYSTEMS system prompts, CONVERSATIONS conversations each
 * under one of them, of 1-4 turns (each turn appends the previous answer and a new question),
 * the turns of all conversations interleaved at random, every conversation's first turn a new
 * question after a system prompt others have used. For each request, in order: what the cache
 * knows at routing time (the whole request, a prefix and the share of its tokens, or nothing),
 * then the request is tokenized by a simulated worker's /tokenize over HTTP (filling the cache,
 * the system messages in the background) before the next one.
 *
 * "Before" is the cache as it was: whole chats only, so only an exact repeat hit.
 */
import { Pool } from "undici";
import { mulberry32 } from "../../sim/prng.js";
import { startSimWorker } from "../../sim/worker.js";
import { TokenizerClient } from "../../src/kv-events/tokenizer-client.js";

const SYSTEMS = 8;
const TURNS_MAX = 4;

export interface TokenizerCacheHits {
  requests: number;
  systems: number;
  conversations: number;
  wholeHits: number;
  prefixHits: number;
  misses: number;
  /** Share of all requests' tokens known at routing time: whole hits, and prefixes too. */
  tokensKnownBefore: number;
  tokensKnownAfter: number;
}

export async function tokenizerCacheHits(quick: boolean): Promise<TokenizerCacheHits> {
  const conversations = quick ? 40 : 400;
  const rand = mulberry32(7);
  const words = "the router cache prefix engine block token tenant river lake summit alpha".split(
    " ",
  );
  const text = (chars: number) => {
    let out = "";
    while (out.length < chars) out += `${words[Math.floor(rand() * words.length)]} `;
    return out.slice(0, chars).trim();
  };
  const systems = Array.from({ length: SYSTEMS }, (_, i) => ({
    role: "system",
    content: `Tenant ${i}. ${text(1500)}`,
  }));
  const pending = Array.from({ length: conversations }, () => ({
    messages: [systems[Math.floor(rand() * SYSTEMS)]!] as { role: string; content: string }[],
    turnsLeft: 1 + Math.floor(rand() * TURNS_MAX),
  }));

  const sim = await startSimWorker({ timeScale: 0 });
  const pool = new Pool(sim.url, { connections: 2 });
  const target = { pool, basePath: "", authorization: undefined };
  const client = new TokenizerClient({
    requestTimeoutMs: 5000,
    maxCachedTokens: 4_000_000,
    maxTokens: 1 << 20,
  });
  const result: TokenizerCacheHits = {
    requests: 0,
    systems: SYSTEMS,
    conversations,
    wholeHits: 0,
    prefixHits: 0,
    misses: 0,
    tokensKnownBefore: 0,
    tokensKnownAfter: 0,
  };
  let tokensAll = 0;
  let knownBefore = 0;
  let knownAfter = 0;
  while (pending.length > 0) {
    const i = Math.floor(rand() * pending.length);
    const conversation = pending[i]!;
    const messages = [...conversation.messages, { role: "user", content: text(200) }];
    const input = { messages };
    const whole = client.cached(undefined, input);
    const prefix = whole === undefined ? client.knownPrefix(undefined, input) : undefined;
    const tokens = (await client.tokenize(target, undefined, input)) ?? [];
    result.requests++;
    tokensAll += tokens.length;
    if (whole !== undefined) {
      result.wholeHits++;
      knownBefore += tokens.length;
      knownAfter += tokens.length;
    } else if (prefix !== undefined) {
      result.prefixHits++;
      knownAfter += prefix.tokens.length;
    } else {
      result.misses++;
    }
    // The answer joins the conversation; its next turn comes later, interleaved with others.
    conversation.messages = [...messages, { role: "assistant", content: text(300) }];
    if (--conversation.turnsLeft === 0) pending.splice(i, 1);
    // The system messages' own call, made in the background, is done before the next request.
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  await pool.close();
  await sim.close();
  result.tokensKnownBefore = knownBefore / tokensAll;
  result.tokensKnownAfter = knownAfter / tokensAll;
  return result;
}
