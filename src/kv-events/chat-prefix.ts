/**
 * Cache keys of a chat's prefixes, for the tokenizer cache (tokenizer-client.ts): chats are cached
 * by message prefix as prompt strings are by line prefix (issue 20), so that a new turn or a new
 * question after a known system prompt routes precisely on what is known of it while its own
 * tokens are still on their way.
 *
 * Two kinds of entry make a chat's prefix:
 * - an earlier turn of the conversation, as it was tokenized for its own request (with the
 *   generation prompt): a follow-up appends the answer and a new question to those messages, and
 *   chat templates render each message on its own, so the earlier tokens begin the new ones (the
 *   generation prompt is the start of the answer's header in the common templates; where it is
 *   not, the last block simply does not match: a shorter match, never a wrong one);
 * - the leading system (or developer) messages, tokenized once on their own without the
 *   generation prompt: what a new question after the same system prompt shares.
 *
 * The engine's template is not run here, so a prefix is only ever what the engine itself
 * tokenized. The keys are the messages' JSON, as for a whole chat.
 */

/** Earlier turns looked at, from the end (a follow-up adds two messages: answer and question). */
const MAX_TURN_PROBES = 4;

const SYSTEM_ROLES = new Set(["system", "developer"]);

/** The key of a whole chat tokenized with the generation prompt (what a request sends). */
export function chatKey(model: string | undefined, messages: readonly unknown[]): string {
  return turnKey(model, JSON.stringify(messages));
}

/**
 * The key of leading messages tokenized without the generation prompt: a chat's system prompt
 * (systemPrefixOf), or the messages before a chat's first media (LeadingMessages); the same key
 * for both, so each finds the other's tokens.
 */
export function leadingKey(model: string | undefined, messages: readonly unknown[]): string {
  return systemKey(model, JSON.stringify(messages));
}

/** `chatKey` of messages already in JSON. */
function turnKey(model: string | undefined, json: string): string {
  return `m\u0000${model ?? ""}\u0000${json}`;
}

/** The key of leading messages tokenized without the generation prompt. */
function systemKey(model: string | undefined, json: string): string {
  return `s\u0000${model ?? ""}\u0000${json}`;
}

/** A prefix to look up: its cache key, and the characters of the chat's JSON it covers. */
export interface ChatPrefixProbe {
  readonly key: string;
  readonly chars: number;
}

/**
 * The cache keys that may hold a prefix of the chat, longest first, and the characters of the
 * whole chat's JSON (to say what share a prefix covers).
 */
export function chatPrefixProbes(
  model: string | undefined,
  messages: readonly unknown[],
): { probes: ChatPrefixProbe[]; totalChars: number } {
  // JSON.stringify of an array is its elements' JSON joined by commas in brackets: the whole
  // chat's JSON is built once, and each prefix's is a slice of it up to its last message's end.
  let body = "";
  const ends: number[] = [0];
  messages.forEach((m, i) => {
    body += `${i === 0 ? "" : ","}${JSON.stringify(m) ?? "null"}`;
    ends.push(body.length);
  });
  const json = (end: number) => `[${body.slice(0, ends[end])}]`;
  const probes: ChatPrefixProbe[] = [];
  const n = messages.length;
  const lowest = Math.max(1, n - MAX_TURN_PROBES);
  for (let end = n - 1; end >= lowest; end--) {
    const prefix = json(end);
    probes.push({ key: turnKey(model, prefix), chars: prefix.length });
    probes.push({ key: systemKey(model, prefix), chars: prefix.length });
  }
  const system = leadingSystemCount(messages);
  if (system > 0 && system < lowest) {
    const prefix = json(system);
    probes.push({ key: systemKey(model, prefix), chars: prefix.length });
  }
  return { probes, totalChars: json(n).length };
}

/**
 * The chat's leading system messages when something follows them, with their cache key: worth
 * tokenizing once on their own, as every new question after them shares them.
 */
export function systemPrefixOf(
  model: string | undefined,
  messages: readonly unknown[],
): { key: string; messages: readonly unknown[] } | undefined {
  const system = leadingSystemCount(messages);
  if (system === 0 || system >= messages.length) return undefined;
  const prefix = messages.slice(0, system);
  return { key: systemKey(model, JSON.stringify(prefix)), messages: prefix };
}

function leadingSystemCount(messages: readonly unknown[]): number {
  let n = 0;
  while (n < messages.length && SYSTEM_ROLES.has(roleOf(messages[n]))) n++;
  return n;
}

function roleOf(message: unknown): string {
  if (message === null || typeof message !== "object") return "";
  const role = (message as { role?: unknown }).role;
  return typeof role === "string" ? role : "";
}
