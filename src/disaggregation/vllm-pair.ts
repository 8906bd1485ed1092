/**
 * vLLM's P/D dispatch (vllm-transfer.ts): the prefill worker first, for one token and the
 * kv_transfer_params; then the decode worker with them, whose answer goes to the client. A
 * prefill that fails, or answers without transfer params, fails the pair before the client saw
 * anything.
 */
import {
  answered2xx,
  failedPair,
  interrupted,
  type PairProtocol,
  type PairResult,
  type PairTry,
  readJson,
  type Side,
  sendSide,
} from "../proxy/pair.js";
import { relay } from "../proxy/relay.js";
import { UsageTap } from "../proxy/usage-tap.js";
import { FAILED } from "../workers/lease.js";
import { decodeBody, transferParamsOf } from "./vllm-transfer.js";

/** A prefill answer (one token and the transfer params) is small; more is not one. */
const MAX_PREFILL_ANSWER_BYTES = 1024 * 1024;

/** Opens one side of the pair on its worker and sends it its body. */
async function sendOneSide<S extends Side>(t: PairTry, side: S, body: Buffer) {
  const worker = side === "prefill" ? t.prefill : t.decode;
  const attempt = t.open(worker, side);
  const result = await sendSide(attempt, "POST", t.req.path, t.headersFor(worker), body);
  return { side, attempt, result };
}

export async function vllmPair(t: PairTry): Promise<PairResult> {
  // Built by intake's parse (pd-body.ts pairView): here it is only sent.
  const p = await sendOneSide(t, "prefill", Buffer.from(t.view.prefill ?? t.bytes));
  const prefill = p.attempt;
  const stopped = interrupted(t, [p]);
  if (stopped !== undefined) return stopped;
  if (!answered2xx(p.result) || p.result.kind !== "answer") return failedPair(t, [p]);
  const status = p.result.upstream.statusCode;
  let params: ReturnType<typeof transferParamsOf>;
  const prefillTap = new UsageTap();
  try {
    params = transferParamsOf(
      await readJson(p.result.upstream, MAX_PREFILL_ANSWER_BYTES, prefillTap),
    );
  } catch {
    params = "its answer broke off";
  }
  const late = interrupted(t, [p]);
  if (late !== undefined) return late;
  if (typeof params === "string") {
    prefill.end(FAILED);
    return {
      kind: "failed",
      failure: {
        kind: "no_transfer_params",
        retryable: true,
        code: "upstream_error",
        message: `Prefill worker ${t.prefill.url} cannot hand off to a decode worker: ${params}.`,
      },
      failed: new Set(["prefill"]),
    };
  }
  prefill.end({ kind: "answered", status });

  const d = await sendOneSide(
    t,
    "decode",
    decodeBody(t.view.base === undefined ? t.bytes : Buffer.from(t.view.base), params),
  );
  const decode = d.attempt;
  const gone = interrupted(t, [d]);
  if (gone !== undefined) return gone;
  if (!answered2xx(d.result) || d.result.kind !== "answer") return failedPair(t, [d]);
  const { outcome, usage } = await relay(d.result.upstream, decode, t.res);
  const prefillUsage = prefillTap.result();
  return {
    kind: "done",
    outcome: { ...outcome, prefillWorker: t.prefill, usage },
    prefillUsage,
  };
}

/** vLLM's prefill side is asked for one token, not streamed: its head comes after the prefill. */
export const VLLM_PAIRS: PairProtocol = {
  name: "vllm",
  exchange: vllmPair,
  prefillStreams: false,
};
