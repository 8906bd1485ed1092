/**
 * SGLang's PD exchange: the same request, with the hand-off fields (bootstrap.ts), to the prefill
 * and the decode worker at once; the decode worker's answer goes to the client, streamed as it
 * comes, and the prefill worker's is read to its end and discarded. As SGLang's model gateway
 * does (sgl-project/sglang sgl-model-gateway/src/routers/http/pd_router.rs: both requests sent
 * together, the decode response returned).
 *
 * The decode side's answer is held until the prefill side has answered whole, as the gateway
 * reads the prefill's answer before it returns the decode's (pd_router.rs,
 * execute_dual_dispatch_internal: process_prefill_response before the decode's stream). A decode
 * engine sends a stream's headers as soon as it takes the request, before the KV cache has come;
 * a prefill worker that dies before it hands over makes the pair fail before the client saw
 * anything, so the pair is retried. The decode side cannot produce a token before the prefill
 * side has computed and sent the KV cache, so the hold costs nothing in time to first token.
 */

import {
  answered2xx,
  drainSide,
  dropSide,
  failedOnItsOwn,
  failedPair,
  interrupted,
  type PairProtocol,
  type PairResult,
  type PairTry,
  type SideState,
  sendSide,
  stopPartner,
} from "../proxy/pair.js";
import { relay } from "../proxy/relay.js";
import { UsageTap } from "../proxy/usage-tap.js";
import { bodyWithBootstrap } from "./bootstrap.js";

export async function sglangPair(t: PairTry): Promise<PairResult> {
  const body = bodyWithBootstrap(t.bytes, t.view, t.prefill);
  const prefill = t.open(t.prefill, "prefill");
  const decode = t.open(t.decode, "decode");
  const prefillTap = new UsageTap();
  let draining: Promise<boolean> | undefined;
  const send = async (side: "prefill" | "decode"): Promise<SideState> => {
    const [attempt, partner] = side === "prefill" ? [prefill, decode] : [decode, prefill];
    const result = await sendSide(attempt, "POST", t.req.path, t.headersFor(attempt.worker), body);
    const state = { side, attempt, result };
    if (failedOnItsOwn(state)) stopPartner(partner);
    // The prefill answer is read as it comes, not once the decode side answers: its first byte
    // says the prompt is computed (the worker's pending prefill ends there, which the policies read).
    else if (side === "prefill" && result.kind === "answer") {
      draining = drainSide(prefill, result.upstream, prefillTap);
      t.track(prefill, draining);
    }
    return state;
  };
  const states = await Promise.all([send("prefill"), send("decode")]);
  const [p, d] = states;
  const stopped = interrupted(t, states);
  if (stopped !== undefined) return stopped;
  if (answered2xx(p.result) && answered2xx(d.result) && d.result.kind === "answer") {
    // The hold: nothing of the decode side's answer is read before the prefill's has ended.
    const handedOver = (await draining) ?? false;
    const late = interrupted(t, [{ side: "decode", attempt: decode, result: d.result }]);
    if (late !== undefined) return late;
    if (!handedOver) {
      dropSide(decode, d.result);
      return {
        kind: "failed",
        failure: {
          kind: "prefill_broke_off",
          retryable: true,
          code: "upstream_error",
          message: `Prefill worker ${t.prefill.url} broke off its answer before it handed the KV cache over.`,
        },
        failed: new Set(["prefill"]),
      };
    }
    const { outcome, usage } = await relay(d.result.upstream, decode, t.res);
    return {
      kind: "done",
      outcome: { ...outcome, prefillWorker: t.prefill, usage },
      prefillUsage: prefillTap.result(),
    };
  }
  return failedPair(t, states);
}

export const SGLANG_PAIRS: PairProtocol = {
  name: "sglang",
  exchange: sglangPair,
  prefillStreams: true,
};
