/**
 * SGLang's PD dispatch: the same request, with the hand-off fields (bootstrap.ts), to the prefill
 * and the decode worker at once; the decode worker's answer goes to the client, streamed as it
 * comes, and the prefill worker's is read to its end and discarded. As SGLang's model gateway
 * does (sgl-project/sglang sgl-model-gateway/src/routers/http/pd_router.rs: both requests sent
 * together, the decode response returned).
 *
 * Both heads are awaited before the decode answer is relayed: a prefill worker that refuses or
 * fails first makes the pair fail before the client saw anything (retried), and since the decode
 * side cannot answer before the prefill side has computed and sent the KV cache, the wait costs
 * nothing in time to first token.
 */
import { relay } from "../proxy/relay.js";
import { UsageTap } from "../proxy/usage-tap.js";
import { bodyWithBootstrap } from "./bootstrap.js";
import { answered2xx, drainSide, sendSide } from "./pair-sides.js";
import {
  failedOnItsOwn,
  failedPair,
  interrupted,
  type PairResult,
  type PairTry,
  type SideState,
  stopPartner,
} from "./pair-try.js";

export async function sglangPair(t: PairTry): Promise<PairResult> {
  const body = bodyWithBootstrap(t.bytes, t.body, t.req.routing.endpoint, t.prefill);
  const prefill = t.open(t.prefill, "prefill");
  const decode = t.open(t.decode, "decode");
  const prefillTap = new UsageTap();
  let draining: Promise<void> | undefined;
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
  if (answered2xx(p.result) && answered2xx(d.result)) {
    if (d.result.kind === "answer") {
      const { outcome, usage } = await relay(d.result.upstream, decode, t.res);
      // The prefill answer ended before the decode one could (the KV came from it); its end is
      // awaited all the same, bounded by the prefill attempt's own timers.
      await draining;
      const prefillUsage = prefillTap.result();
      return {
        kind: "done",
        outcome: { ...outcome, prefillWorker: t.prefill, usage },
        prefillUsage,
      };
    }
  }
  return failedPair(t, states);
}
