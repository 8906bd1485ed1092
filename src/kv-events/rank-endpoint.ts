/**
 * Where a data-parallel rank publishes. With data-parallel size N, vLLM and SGLang run one
 * ZmqEventPublisher per rank, each on the configured endpoint with its port moved up by the rank
 * (`offset_endpoint_port` in vllm/distributed/kv_events.py and
 * sglang/srt/disaggregation/kv_events.py): rank r of `tcp://host:5557` is `tcp://host:5557+r`, the
 * replay endpoint likewise. Rank 0 keeps the endpoint as it is.
 */

/** Highest data-parallel size the router follows per worker (one subscription per rank). */
export const MAX_DP_RANKS = 64;

/**
 * The endpoint of rank `rank`; undefined when the engines cannot offset it (only tcp:// ports are
 * offset; vLLM refuses ipc:// with a rank above 0) or the port would leave the valid range.
 */
export function rankEndpoint(endpoint: string, rank: number): string | undefined {
  if (rank === 0) return endpoint;
  const match = /^(tcp:\/\/.*):(\d+)$/.exec(endpoint);
  if (match === null) return undefined;
  const port = Number(match[2]) + rank;
  if (port > 65_535) return undefined;
  return `${match[1]}:${port}`;
}
