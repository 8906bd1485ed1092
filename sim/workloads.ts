/**
 * Seeded, deterministic request workloads for tests, benchmarks and the demo: the same options and
 * seed always give the same requests in the same order; another seed gives other text and order.
 *
 * Sizes are in tokens of the simulator's stand-in tokenizer: generated text is pseudo-random words
 * cut to exactly 4 characters per token, with no newlines inside, so a system prompt of N tokens
 * is N tokens to the simulated engine.
 */

import { imageText } from "./media.js";
import { generatedText } from "./output-text.js";
import { exponential, mulberry32, type Rng, randomInt, shuffleInPlace } from "./prng.js";
import { type ChatMessage, renderChat } from "./template.js";
import { CHARS_PER_TOKEN } from "./tokenizer.js";

export type RequestKind = "chat" | "completion";

export interface RequestSpec {
  id: string;
  /** Shared-prefix group (generatedSharedPrefix; hotPrefix uses 0). */
  group?: number;
  /** Conversation and turn (0-based) of multiTurnChat. */
  conversation?: number;
  turn?: number;
  kind: RequestKind;
  /** For kind "chat". */
  messages?: ChatMessage[];
  /** For kind "chat": an image URL sent ahead of the last message's text (an image_url part). */
  image?: string;
  /** For kind "completion". */
  prompt?: string;
  maxTokens: number;
}

// A small fixed vocabulary: enough variety that unrelated texts share no 4-character run of blocks.
const WORDS = (
  "alpha bravo cedar delta ember fable gamma harbor iris jasper kelp lumen maple nectar onyx " +
  "pepper quartz raven sable timber umber velvet willow xenon yarrow zephyr amber basil cobalt " +
  "dune echo fjord granite hazel indigo juniper kestrel lagoon meadow nimbus orchid prairie quill " +
  "ridge saffron thistle tundra valley walnut zenith anchor beacon canyon drift falcon glacier " +
  "horizon island lantern mosaic north oasis pebble river summit tide vapor wander"
).split(" ");

/** Pseudo-random words, exactly `tokens` × 4 characters long, no newline. */
export function randomText(rng: Rng, tokens: number): string {
  const length = tokens * CHARS_PER_TOKEN;
  const words: string[] = [];
  let size = 0;
  while (size < length) {
    const word = WORDS[randomInt(rng, WORDS.length)] as string;
    size += (words.length > 0 ? 1 : 0) + word.length; // length of words.join(" ")
    words.push(word);
  }
  return words.join(" ").slice(0, length);
}

/** The text a spec asks the engine to prefill (chat through the simulator's template). */
export function promptTextOf(spec: RequestSpec): string {
  if (spec.kind !== "chat") return spec.prompt ?? "";
  const messages = spec.messages ?? [];
  const last = messages.at(-1);
  if (spec.image === undefined || last === undefined) return renderChat(messages);
  // The image's placeholders ahead of the message's text, as the engine renders it (media.ts).
  const withImage = { ...last, content: imageText(spec.image, true) + last.content };
  return renderChat([...messages.slice(0, -1), withImage]);
}

/** The request body for the spec's OpenAI endpoint (/v1/chat/completions or /v1/completions). */
export function openAiBody(spec: RequestSpec, model?: string): Record<string, unknown> {
  const base = model === undefined ? {} : { model };
  if (spec.kind !== "chat") return { ...base, prompt: spec.prompt, max_tokens: spec.maxTokens };
  const messages: unknown[] = [...(spec.messages ?? [])];
  const last = spec.messages?.at(-1);
  if (spec.image !== undefined && last !== undefined) {
    messages[messages.length - 1] = {
      role: last.role,
      content: [
        { type: "image_url", image_url: { url: spec.image } },
        { type: "text", text: last.content },
      ],
    };
  }
  return { ...base, messages, max_tokens: spec.maxTokens };
}

export interface MultimodalOptions {
  requests: number;
  /** Distinct images; each request with an image carries one, uniformly at random. */
  images: number;
  /** Share of requests (0-1) that carry an image. */
  imageShare: number;
  systemPromptTokens: number;
  /** The instruction that follows the image in every request with one (the same text each time). */
  instructionTokens: number;
  questionTokens: number;
  outputTokens: number;
  seed: number;
}

/**
 * Chats behind one shared system prompt; `imageShare` of them send one of `images` images (a
 * small inline PNG-like payload, distinct bytes per image), then the same instruction, then a
 * question of their own. Two requests with the same instruction and different images share the
 * text after the image but not the engine's cache of it: what a router keyed on text alone would
 * claim falsely. `group`: the image (0..images-1), or `images` for a request without one.
 */
export function multimodalChat(o: MultimodalOptions): RequestSpec[] {
  const requests = positiveInt("requests", o.requests);
  const images = positiveInt("images", o.images);
  const rng = mulberry32(o.seed);
  const system = randomText(rng, positiveInt("systemPromptTokens", o.systemPromptTokens));
  const instruction = randomText(rng, positiveInt("instructionTokens", o.instructionTokens));
  const urls = Array.from(
    { length: images },
    (_, i) =>
      `data:image/png;base64,${Buffer.from(`simulated image ${i}: ${randomText(rng, 16)}`).toString("base64")}`,
  );
  const specs: RequestSpec[] = [];
  for (let i = 0; i < requests; i++) {
    const question = randomText(rng, positiveInt("questionTokens", o.questionTokens));
    const withImage = rng() < o.imageShare;
    const image = withImage ? randomInt(rng, images) : images;
    const spec = specFor(
      `mm-${i}`,
      "chat",
      system,
      withImage ? `${instruction}\n${question}` : question,
      positiveInt("outputTokens", o.outputTokens),
    );
    spec.group = image;
    if (withImage) spec.image = urls[image];
    specs.push(spec);
  }
  return specs;
}

function specFor(
  id: string,
  kind: RequestKind,
  system: string,
  question: string,
  maxTokens: number,
): RequestSpec {
  return kind === "chat"
    ? {
        id,
        kind,
        messages: [
          { role: "system", content: system },
          { role: "user", content: question },
        ],
        maxTokens,
      }
    : { id, kind, prompt: `${system}\n${question}`, maxTokens };
}

function positiveInt(name: string, value: number, min = 1): number {
  if (!Number.isInteger(value) || value < min) {
    throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  }
  return value;
}

export interface SharedPrefixOptions {
  groups?: number;
  promptsPerGroup?: number;
  systemPromptTokens?: number;
  questionTokens?: number;
  outputTokens?: number;
  kind?: RequestKind;
  seed: number;
}

/**
 * SGLang bench_serving's "generated-shared-prefix": `groups` random system prompts, each followed
 * by `promptsPerGroup` random questions. Defaults are bench_serving's (64 × 16, 2048 + 128 → 256).
 */
export function generatedSharedPrefix(o: SharedPrefixOptions): RequestSpec[] {
  const groups = positiveInt("groups", o.groups ?? 64);
  const perGroup = positiveInt("promptsPerGroup", o.promptsPerGroup ?? 16);
  const systemTokens = positiveInt("systemPromptTokens", o.systemPromptTokens ?? 2048);
  const questionTokens = positiveInt("questionTokens", o.questionTokens ?? 128);
  const outputTokens = positiveInt("outputTokens", o.outputTokens ?? 256);
  const kind = o.kind ?? "completion";
  const rng = mulberry32(o.seed);
  const specs: RequestSpec[] = [];
  for (let g = 0; g < groups; g++) {
    const system = randomText(rng, systemTokens);
    for (let p = 0; p < perGroup; p++) {
      const spec = specFor(
        `gsp-g${g}-p${p}`,
        kind,
        system,
        randomText(rng, questionTokens),
        outputTokens,
      );
      spec.group = g;
      specs.push(spec);
    }
  }
  return shuffleInPlace(rng, specs);
}

export interface MultiTurnOptions {
  conversations: number;
  turns: number;
  systemPromptTokens: number;
  turnTokens: number;
  outputTokens: number;
  /** One system prompt for every conversation instead of one each (default false). */
  sharedSystemPrompt?: boolean;
  seed: number;
}

/**
 * Chat sessions: turn k re-sends the system prompt, every earlier question and reply, and a new
 * question. Replies are exactly what the simulator generates for `outputTokens` tokens, so an
 * engine that served the previous turn holds the whole history in its cache. Rounds are in
 * order (turn k of every conversation before turn k + 1), shuffled within a round.
 */
export function multiTurnChat(o: MultiTurnOptions): RequestSpec[] {
  const conversations = positiveInt("conversations", o.conversations);
  const turns = positiveInt("turns", o.turns);
  const systemTokens = positiveInt("systemPromptTokens", o.systemPromptTokens);
  const turnTokens = positiveInt("turnTokens", o.turnTokens);
  const outputTokens = positiveInt("outputTokens", o.outputTokens);
  const rng = mulberry32(o.seed);
  const reply = generatedText(outputTokens);
  const shared = o.sharedSystemPrompt === true ? randomText(rng, systemTokens) : undefined;
  const histories: ChatMessage[][] = [];
  for (let c = 0; c < conversations; c++) {
    histories.push([{ role: "system", content: shared ?? randomText(rng, systemTokens) }]);
  }
  const specs: RequestSpec[] = [];
  for (let t = 0; t < turns; t++) {
    const round: RequestSpec[] = [];
    for (let c = 0; c < conversations; c++) {
      const history = histories[c] as ChatMessage[];
      if (t > 0) history.push({ role: "assistant", content: reply });
      history.push({ role: "user", content: randomText(rng, turnTokens) });
      round.push({
        id: `mt-c${c}-t${t}`,
        conversation: c,
        turn: t,
        kind: "chat",
        messages: history.map((m) => ({ ...m })),
        maxTokens: outputTokens,
      });
    }
    specs.push(...shuffleInPlace(rng, round));
  }
  return specs;
}

export interface CachePressureOptions {
  /** Tenants; tenant popularity follows Zipf's law over them. */
  tenants: number;
  /** Zipf exponent s: the k-th most popular tenant is chosen with weight 1 / k^s. >= 0. */
  zipfExponent: number;
  /** One tool preamble every tenant's system prompt starts with (tool definitions, house rules). */
  toolPreambleTokens: number;
  /** Each tenant's own system prompt, after the preamble (the shortest, with tenantPromptMaxTokens). */
  tenantPromptTokens: number;
  /**
   * When set, each tenant's own prompt is drawn uniformly between tenantPromptTokens and this, so
   * tenants take unequal room in a cache (real tenants' prompts do).
   */
  tenantPromptMaxTokens?: number;
  /** Conversations in all; each belongs to a tenant drawn by popularity. */
  conversations: number;
  /** Conversations under way at once: they arrive in waves of this many. */
  activeConversations: number;
  turns: number;
  turnTokens: number;
  outputTokens: number;
  seed: number;
}

/**
 * Multi-tenant chat traffic under cache pressure: every tenant's system prompt is one long tool
 * preamble shared by all tenants followed by a long prompt of its own, and each conversation
 * (of a tenant drawn by Zipf popularity, so a few tenants carry most traffic) re-sends its whole
 * history every turn. Conversations arrive in waves of `activeConversations`; within a wave,
 * turn k of every conversation comes before turn k + 1, shuffled. Which tenant is the most popular
 * is itself drawn at random, so tenant ids say nothing of popularity. `group` = tenant.
 */
export function cachePressure(o: CachePressureOptions): RequestSpec[] {
  const tenants = positiveInt("tenants", o.tenants);
  if (!Number.isFinite(o.zipfExponent) || o.zipfExponent < 0) {
    throw new RangeError(`zipfExponent must be a finite number >= 0, got ${o.zipfExponent}`);
  }
  const preambleTokens = positiveInt("toolPreambleTokens", o.toolPreambleTokens);
  const tenantTokens = positiveInt("tenantPromptTokens", o.tenantPromptTokens);
  const conversations = positiveInt("conversations", o.conversations);
  const active = positiveInt("activeConversations", o.activeConversations);
  const turns = positiveInt("turns", o.turns);
  const turnTokens = positiveInt("turnTokens", o.turnTokens);
  const outputTokens = positiveInt("outputTokens", o.outputTokens);
  const maxTenantTokens =
    o.tenantPromptMaxTokens === undefined
      ? tenantTokens
      : positiveInt("tenantPromptMaxTokens", o.tenantPromptMaxTokens);
  if (maxTenantTokens < tenantTokens) {
    throw new RangeError(
      `tenantPromptMaxTokens must be >= tenantPromptTokens (${tenantTokens}), got ${maxTenantTokens}`,
    );
  }
  const rng = mulberry32(o.seed);
  const preamble = randomText(rng, preambleTokens);
  // The length is drawn only with a spread, so the workloads without one keep their texts.
  const tenantLength = () =>
    maxTenantTokens === tenantTokens
      ? tenantTokens
      : tenantTokens + randomInt(rng, maxTenantTokens - tenantTokens + 1);
  const systems = Array.from(
    { length: tenants },
    () => `${preamble}\n${randomText(rng, tenantLength())}`,
  );
  // byRank[k] = the tenant with the k-th highest popularity.
  const byRank = shuffleInPlace(rng, [...Array(tenants).keys()]);
  const cumulative: number[] = [];
  let total = 0;
  for (let k = 0; k < tenants; k++) {
    total += 1 / (k + 1) ** o.zipfExponent;
    cumulative.push(total);
  }
  const drawTenant = (): number => {
    const u = rng() * total;
    let k = 0;
    while (k < tenants - 1 && (cumulative[k] as number) <= u) k++;
    return byRank[k] as number;
  };
  const reply = generatedText(outputTokens);
  const specs: RequestSpec[] = [];
  for (let first = 0; first < conversations; first += active) {
    const wave: { id: number; tenant: number; history: ChatMessage[] }[] = [];
    for (let c = first; c < Math.min(conversations, first + active); c++) {
      const tenant = drawTenant();
      wave.push({
        id: c,
        tenant,
        history: [{ role: "system", content: systems[tenant] as string }],
      });
    }
    for (let t = 0; t < turns; t++) {
      const round: RequestSpec[] = [];
      for (const conversation of wave) {
        if (t > 0) conversation.history.push({ role: "assistant", content: reply });
        conversation.history.push({ role: "user", content: randomText(rng, turnTokens) });
        round.push({
          id: `cp-c${conversation.id}-t${t}`,
          group: conversation.tenant,
          conversation: conversation.id,
          turn: t,
          kind: "chat",
          messages: conversation.history.map((m) => ({ ...m })),
          maxTokens: outputTokens,
        });
      }
      specs.push(...shuffleInPlace(rng, round));
    }
  }
  return specs;
}

export interface NoSharingOptions {
  requests: number;
  promptTokens: number;
  outputTokens: number;
  kind?: RequestKind;
  seed: number;
}

/** Unique prompts: each starts with its own number, so no two share even the first block. */
export function noSharing(o: NoSharingOptions): RequestSpec[] {
  const requests = positiveInt("requests", o.requests);
  const promptTokens = positiveInt("promptTokens", o.promptTokens);
  const outputTokens = positiveInt("outputTokens", o.outputTokens);
  const kind = o.kind ?? "completion";
  const rng = mulberry32(o.seed);
  const specs: RequestSpec[] = [];
  for (let i = 0; i < requests; i++) {
    const text = `#${i} ${randomText(rng, promptTokens)}`.slice(0, promptTokens * CHARS_PER_TOKEN);
    specs.push(
      kind === "chat"
        ? {
            id: `ns-${i}`,
            kind,
            messages: [{ role: "user", content: text }],
            maxTokens: outputTokens,
          }
        : { id: `ns-${i}`, kind, prompt: text, maxTokens: outputTokens },
    );
  }
  return shuffleInPlace(rng, specs);
}

export interface HotPrefixOptions {
  requests: number;
  systemPromptTokens: number;
  questionTokens: number;
  outputTokens: number;
  kind?: RequestKind;
  seed: number;
}

/** One very popular system prompt shared by every request, each with its own question. */
export function hotPrefix(o: HotPrefixOptions): RequestSpec[] {
  const requests = positiveInt("requests", o.requests);
  const systemTokens = positiveInt("systemPromptTokens", o.systemPromptTokens);
  const questionTokens = positiveInt("questionTokens", o.questionTokens);
  const outputTokens = positiveInt("outputTokens", o.outputTokens);
  const kind = o.kind ?? "chat";
  const rng = mulberry32(o.seed);
  const system = randomText(rng, systemTokens);
  const specs: RequestSpec[] = [];
  for (let i = 0; i < requests; i++) {
    const spec = specFor(`hot-${i}`, kind, system, randomText(rng, questionTokens), outputTokens);
    spec.group = 0;
    specs.push(spec);
  }
  return shuffleInPlace(rng, specs);
}

/**
 * When requests start. Closed loop: keep `concurrency` requests outstanding, the next one starting
 * when one finishes (no gaps). Poisson: open loop, exponential gaps with mean 1000 / rate ms.
 */
export interface ArrivalProcess {
  readonly kind: "closed-loop" | "poisson";
  /** Most requests outstanding at once (Infinity for an open loop). */
  readonly concurrency: number;
  /** The first `count` inter-arrival gaps in ms; the same on every call. */
  gapsMs(count: number): number[];
}

export function closedLoop(concurrency: number): ArrivalProcess {
  positiveInt("concurrency", concurrency);
  return {
    kind: "closed-loop",
    concurrency,
    gapsMs: (count) => new Array<number>(positiveInt("count", count, 0)).fill(0),
  };
}

export function poissonArrivals(ratePerSec: number, seed: number): ArrivalProcess {
  if (!Number.isFinite(ratePerSec) || ratePerSec <= 0) {
    throw new RangeError(`ratePerSec must be a finite number > 0, got ${ratePerSec}`);
  }
  const meanMs = 1000 / ratePerSec;
  return {
    kind: "poisson",
    concurrency: Number.POSITIVE_INFINITY,
    gapsMs: (count) => {
      const rng = mulberry32(seed);
      const gaps: number[] = [];
      for (let i = 0; i < positiveInt("count", count, 0); i++) gaps.push(exponential(rng, meanMs));
      return gaps;
    },
  };
}
