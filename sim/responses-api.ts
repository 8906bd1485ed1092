/**
 * The OpenAI Responses API as vLLM and SGLang serve it (vllm/entrypoints/openai/responses/serving.py,
 * python/sglang/srt/entrypoints/openai/serving_responses.py): a request's `input` (a string or
 * message items) and `instructions` become a chat, and `previous_response_id` continues a response
 * the engine stored in its own memory, so only the worker that produced it can continue it. The
 * simulator keeps each worker's responses the same way, bounded.
 */
import { BadRequest } from "./protocol.js";
import type { SequenceResult } from "./responses.js";
import type { ChatMessage } from "./template.js";

/** Most responses a worker keeps (the oldest goes first), as a bound. */
const MAX_STORED = 4096;

type Json = Record<string, unknown>;

/** A previous_response_id this worker does not hold: 404, as the engines answer it. */
export class ResponseNotFound extends Error {
  constructor(readonly responseId: string) {
    super(`Response with id '${responseId}' not found.`);
  }
}

/** One worker's stored responses: the whole conversation each one ended, its reply included. */
export class ResponseStore {
  private readonly stored = new Map<string, ChatMessage[]>();

  constructor(private readonly limit = MAX_STORED) {}

  get size(): number {
    return this.stored.size;
  }

  has(id: string): boolean {
    return this.stored.has(id);
  }

  put(id: string, conversation: ChatMessage[]): void {
    this.stored.set(id, conversation);
    if (this.stored.size > this.limit) {
      const oldest = this.stored.keys().next().value as string;
      this.stored.delete(oldest);
    }
  }

  get(id: string): ChatMessage[] | undefined {
    return this.stored.get(id);
  }
}

/**
 * The chat a Responses request runs: the previous response's conversation (vLLM's
 * `_construct_input_messages` appends the new input to it), the instructions as the system
 * message, then the input. Throws BadRequest for a malformed body and ResponseNotFound for a
 * previous_response_id this worker does not hold.
 */
export function responsesConversation(b: Json, store: ResponseStore): ChatMessage[] {
  const messages: ChatMessage[] = [];
  const previous = b.previous_response_id;
  if (previous !== undefined && previous !== null) {
    if (typeof previous !== "string" || !previous.startsWith("resp")) {
      throw new BadRequest(
        `Invalid 'response_id': '${String(previous)}'. Expected an ID that begins with 'resp'.`,
        "response_id",
      );
    }
    const earlier = store.get(previous);
    if (earlier === undefined) throw new ResponseNotFound(previous);
    messages.push(...earlier.filter((m) => m.role !== "system"));
  }
  if (typeof b.instructions === "string")
    messages.unshift({ role: "system", content: b.instructions });
  const input = b.input;
  if (typeof input === "string") messages.push({ role: "user", content: input });
  else if (Array.isArray(input)) {
    for (const [i, item] of input.entries()) messages.push(inputItem(item, i));
  } else throw new BadRequest("input must be a string or a list of items", "input");
  if (messages.length === 0) throw new BadRequest("input must not be empty", "input");
  return messages;
}

function inputItem(item: unknown, i: number): ChatMessage {
  if (item === null || typeof item !== "object") {
    throw new BadRequest(`input[${i}] must be an object`, "input");
  }
  const { role, content, type, output } = item as Json;
  if (type === "function_call_output" && typeof output === "string")
    return { role: "tool", content: output };
  if (typeof role !== "string") throw new BadRequest(`input[${i}].role must be a string`, "input");
  if (typeof content === "string") return { role, content };
  if (!Array.isArray(content))
    throw new BadRequest(`input[${i}].content must be a string or a list`, "input");
  const texts: string[] = [];
  for (const part of content) {
    const p = (part ?? {}) as Json;
    if ((p.type === "input_text" || p.type === "output_text") && typeof p.text === "string")
      texts.push(p.text);
  }
  return { role, content: texts.join("\n") };
}

/** The request fields a response object echoes back. */
export interface ResponseEcho {
  previousResponseId: string | null;
  instructions: string | null;
  maxOutputTokens: number | null;
}

export function responseEcho(b: Json): ResponseEcho {
  return {
    previousResponseId: typeof b.previous_response_id === "string" ? b.previous_response_id : null,
    instructions: typeof b.instructions === "string" ? b.instructions : null,
    maxOutputTokens: typeof b.max_output_tokens === "number" ? b.max_output_tokens : null,
  };
}

/** The body as the chat job the engine runs (max_output_tokens is chat's max_tokens). */
export function chatBodyOf(b: Json, messages: ChatMessage[]): Json {
  return {
    model: b.model,
    messages,
    stream: b.stream === true,
    ...(typeof b.max_output_tokens === "number" ? { max_tokens: b.max_output_tokens } : {}),
  };
}

/** A ResponsesResponse (vllm/entrypoints/openai/responses/protocol.py; OpenAI's Response object). */
export function responseObject(
  meta: { id: string; created: number; model: string },
  s: SequenceResult,
  text: string,
  echo: ResponseEcho,
  status: "in_progress" | "completed",
) {
  const completed = status === "completed";
  return {
    id: meta.id,
    object: "response",
    created_at: meta.created,
    model: meta.model,
    status,
    instructions: echo.instructions,
    previous_response_id: echo.previousResponseId,
    max_output_tokens: echo.maxOutputTokens,
    parallel_tool_calls: true,
    tool_choice: "auto",
    tools: [],
    temperature: 1,
    top_p: 1,
    truncation: "disabled",
    metadata: null,
    error: null,
    incomplete_details: null,
    output: completed
      ? [
          {
            id: `msg_${meta.id.slice(5)}`,
            type: "message",
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text, annotations: [], logprobs: null }],
          },
        ]
      : [],
    usage: completed
      ? {
          input_tokens: s.promptTokens,
          input_tokens_details: { cached_tokens: s.cachedTokens },
          output_tokens: s.generated,
          output_tokens_details: { reasoning_tokens: 0 },
          total_tokens: s.promptTokens + s.generated,
        }
      : null,
  };
}

/** One server-sent event of a Responses stream: `event:` names it, `data:` carries it. */
export function responseEvent(type: string, sequence: number, fields: Json): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence, ...fields })}\n\n`;
}
