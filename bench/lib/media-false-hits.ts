/**
 * False hits on requests with an image (bench:routing's multimodal workload): a decision that
 * sends a request to a worker for a match on its image message when that worker was never sent
 * the image. The engines key the blocks of an image message by the image's content (vLLM's
 * block-hash extra keys, SGLang's pad values; sim/media.ts): a worker that never prefilled this
 * image holds nothing of the message, whatever text follows the image, so a claim there is false.
 *
 * Counted at every decision of the router (reached through a private field, as
 * routing-diagnosis.ts does): the index's match for the chosen worker, in characters of the
 * routing text, against where the image message's content starts. A claim is at least
 * CLAIM_CHARS into that content (a few characters of two image digests may agree by chance).
 */
import type { Scheduler } from "../../src/scheduling/scheduler.js";
import type { RunningRouter } from "../../src/server.js";
import { type Decided, hookDecisions } from "./decision-hook.js";

/** Characters into the image message that count as a claim on it (about four tokens). */
const CLAIM_CHARS = 16;

export interface MediaFalseHits {
  /** Decisions for requests with an image. */
  imageDecisions: number;
  /** Of those, decisions whose chosen worker was credited with part of the image message. */
  claimed: number;
  /** Of those, decisions whose chosen worker had never been sent the image: false hits. */
  falseHits: number;
}

export function emptyMediaFalseHits(): MediaFalseHits {
  return { imageDecisions: 0, claimed: 0, falseHits: 0 };
}

/**
 * Tallies the router's decisions into `tally`. `imageOf` names a routing text's image (undefined
 * for a request without one); `contentStart` is where its image message's content begins.
 */
export function countMediaFalseHits(
  router: RunningRouter,
  imageOf: (text: string) => { image: number; contentStart: number } | undefined,
  tally: MediaFalseHits,
): void {
  /** Worker id → images sent there so far (by any decision of this router). */
  const sent = new Map<string, Set<number>>();
  let index: Scheduler["index"] | undefined;
  index = hookDecisions(router, (candidates, request, decide) => {
    const info = imageOf(request.text);
    if (info === undefined) return decide();
    const matched: number[] = new Array(candidates.length).fill(0);
    index?.match(request.text, request.model, candidates, matched);
    const count = (decision: Decided): Decided => {
      if (decision === undefined) return decision;
      const chosen = candidates.indexOf(decision.worker);
      const id = decision.worker.id;
      let images = sent.get(id);
      if (images === undefined) {
        images = new Set();
        sent.set(id, images);
      }
      tally.imageDecisions++;
      if ((matched[chosen] ?? 0) >= info.contentStart + CLAIM_CHARS) {
        tally.claimed++;
        if (!images.has(info.image)) tally.falseHits++;
      }
      images.add(info.image);
      return decision;
    };
    const out = decide();
    return out instanceof Promise ? out.then(count) : count(out);
  }).index;
}
