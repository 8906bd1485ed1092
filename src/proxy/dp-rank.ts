/**
 * Sending a request to one data-parallel rank of an engine (the rank whose KV cache holds its
 * prefix, chosen by the index):
 * - vLLM reads the `X-data-parallel-rank` header on its OpenAI endpoints
 *   (vllm/entrypoints/openai/engine/serving.py, `_get_data_parallel_rank`);
 * - SGLang reads the same header on its OpenAI endpoints, before the body's `routed_dp_rank`
 *   (python/sglang/srt/entrypoints/openai/serving_base.py, `extract_routed_dp_rank_from_header`),
 *   and its native /generate takes the rank in the body: `routed_dp_rank`, or `data_parallel_rank`,
 *   the older spelling it still accepts (python/sglang/srt/managers/io_struct.py,
 *   GenerateReqInput), which is the one older releases know too.
 * A client that pinned a rank itself (the header, or either body field) keeps its choice.
 */
import type { IncomingHttpHeaders } from "node:http";
import { bodyWithLeadingField } from "./json-field.js";

export const DP_RANK_HEADER = "x-data-parallel-rank";

const BODY_FIELDS = [Buffer.from('"routed_dp_rank"'), Buffer.from('"data_parallel_rank"')];

/** Whether the client already chose a rank (then the router leaves it alone). */
export function clientPinnedRank(headers: IncomingHttpHeaders, body: Buffer | undefined): boolean {
  if (headers[DP_RANK_HEADER] !== undefined) return true;
  return body !== undefined && BODY_FIELDS.some((field) => body.includes(field));
}

/** The rank to send: the one the index chose, unless the client chose one itself. */
export function rankToSend(
  chosen: number | undefined,
  headers: IncomingHttpHeaders,
  body: Buffer | undefined,
): number | undefined {
  return chosen === undefined || clientPinnedRank(headers, body) ? undefined : chosen;
}

/** The upstream headers with the rank added (as they are without one). */
export function headersWithRank(
  headers: Record<string, string | string[]>,
  rank: number | undefined,
): Record<string, string | string[]> {
  return rank === undefined ? headers : { ...headers, [DP_RANK_HEADER]: String(rank) };
}

/** The body as sent to the worker: SGLang's /generate takes the rank in the body. */
export function bodyForRank(
  body: Buffer | undefined,
  path: string,
  engine: string | undefined,
  rank: number | undefined,
): Buffer | undefined {
  if (body === undefined || rank === undefined || path !== "/generate" || engine !== "sglang")
    return body;
  return generateBodyWithRank(body, rank);
}

/**
 * SGLang's /generate body with `data_parallel_rank` added as its first field; any other body as
 * it is (a body that is not a JSON object is the engine's to refuse).
 */
export function generateBodyWithRank(body: Buffer, rank: number): Buffer {
  return bodyWithLeadingField(body, "data_parallel_rank", String(rank));
}
