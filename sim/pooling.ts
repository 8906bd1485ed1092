/**
 * The engines' scoring routes and /detokenize, answered at once (no batch slot): what a router
 * test needs is the engine's answer shape and which worker gave it.
 * - rerank: vLLM's RerankResponse (vllm/entrypoints/pooling/score/protocol.py) on /rerank and
 *   /v1/rerank; SGLang's /v1/rerank (serving_rerank.py) answers a list of the same results.
 * - score: vLLM's ScoreResponse (`text_1`/`text_2`); SGLang's /v1/score (serving_score.py,
 *   ScoringResponse: `query`/`items`, `scores`).
 * - classify: vLLM's ClassificationResponse (pooling/classify/protocol.py).
 * - detokenize: vLLM's `{prompt}` (serve/tokenize/protocol.py DetokenizeResponse), SGLang's `{text}`.
 * Scores are derived from the token ids, so equal inputs score equally on every worker.
 */
import { FNV_OFFSET, FNV_PRIME } from "./hash.js";
import type { SimFlavor } from "./options.js";
import { BadRequest, type SimTokenize } from "./protocol.js";

type Json = Record<string, unknown>;

export type PoolingRoute = "rerank" | "score" | "classify" | "detokenize";

export const POOLING_PATHS: Readonly<Record<string, PoolingRoute>> = {
  "/v1/rerank": "rerank",
  "/rerank": "rerank",
  "/v1/score": "score",
  "/score": "score",
  "/v1/classify": "classify",
  "/classify": "classify",
  "/detokenize": "detokenize",
};

export interface PoolingContext {
  flavor: SimFlavor;
  model: string;
  encode: SimTokenize;
  nextId(prefix: string): string;
}

/** The answer's body; throws BadRequest (400) for a body the engine refuses. */
export function poolingAnswer(route: PoolingRoute, body: unknown, ctx: PoolingContext): unknown {
  if (body === null || typeof body !== "object" || Array.isArray(body))
    throw new BadRequest("request body must be a JSON object");
  const b = body as Json;
  const model = typeof b.model === "string" && b.model !== "" ? b.model : ctx.model;
  switch (route) {
    case "rerank":
      return rerank(b, model, ctx);
    case "score":
      return score(b, model, ctx);
    case "classify":
      return classify(b, model, ctx);
    case "detokenize":
      return detokenizeAnswer(b);
  }
}

function rerank(b: Json, model: string, ctx: PoolingContext) {
  const query = requiredString(b.query, "query");
  const documents = stringList(b.documents, "documents");
  const q = ctx.encode(query, true);
  let tokens = 0;
  const results = documents.map((text, index) => {
    const d = ctx.encode(text, false);
    tokens += q.length + d.length;
    return { index, document: { text }, relevance_score: relevance(q, d) };
  });
  results.sort((x, y) => y.relevance_score - x.relevance_score);
  const topN = typeof b.top_n === "number" && b.top_n > 0 ? b.top_n : results.length;
  const top = results.slice(0, topN);
  if (ctx.flavor === "sglang") return top.map((r) => ({ score: r.relevance_score, ...r }));
  return { id: ctx.nextId("rerank-"), model, usage: { total_tokens: tokens }, results: top };
}

function score(b: Json, model: string, ctx: PoolingContext) {
  if (ctx.flavor === "sglang" || b.query !== undefined) {
    const query = ctx.encode(requiredString(b.query, "query"), true);
    const items = stringList(b.items, "items");
    return {
      scores: items.map((item) => [relevance(query, ctx.encode(item, false))]),
      model,
      usage: null,
      object: "scoring",
    };
  }
  const first = ctx.encode(requiredString(b.text_1, "text_1"), true);
  const seconds = typeof b.text_2 === "string" ? [b.text_2] : stringList(b.text_2, "text_2");
  let tokens = 0;
  const data = seconds.map((text, index) => {
    const t = ctx.encode(text, false);
    tokens += first.length + t.length;
    return { index, object: "score", score: relevance(first, t) };
  });
  return {
    id: ctx.nextId("score-"),
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  };
}

function classify(b: Json, model: string, ctx: PoolingContext) {
  const raw = b.input ?? b.text;
  const inputs = typeof raw === "string" ? [raw] : stringList(raw, "input");
  let tokens = 0;
  const data = inputs.map((text, index) => {
    const ids = ctx.encode(text, true);
    tokens += ids.length;
    const p = relevance(ids, []);
    return { index, label: p >= 0.5 ? "LABEL_1" : "LABEL_0", probs: [1 - p, p], num_classes: 2 };
  });
  return {
    id: ctx.nextId("classify-"),
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model,
    data,
    usage: { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0 },
  };
}

function detokenizeAnswer(b: Json) {
  const tokens = b.tokens;
  if (!Array.isArray(tokens) || !tokens.every((t) => Number.isInteger(t) && t >= 0))
    throw new BadRequest("tokens must be a list of token ids", "tokens");
  // The stand-in tokenizer hashes text into ids: they do not map back, so each id stands for itself.
  const text = (tokens as number[]).map((t) => `<${t}>`).join("");
  return { prompt: text, text };
}

/** A deterministic score in [0, 1) from the two token lists. */
function relevance(a: readonly number[], b: readonly number[]): number {
  let digest = FNV_OFFSET;
  for (const t of a) digest = Math.imul(digest ^ t, FNV_PRIME);
  digest = Math.imul(digest ^ 0xff, FNV_PRIME);
  for (const t of b) digest = Math.imul(digest ^ t, FNV_PRIME);
  return (digest >>> 0) / 2 ** 32;
}

function requiredString(v: unknown, param: string): string {
  if (typeof v !== "string") throw new BadRequest(`${param} must be a string`, param);
  return v;
}

function stringList(v: unknown, param: string): string[] {
  if (!Array.isArray(v) || v.length === 0 || !v.every((x) => typeof x === "string"))
    throw new BadRequest(`${param} must be a non-empty list of strings`, param);
  return v as string[];
}
