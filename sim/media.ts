/**
 * Images in the simulated engine's prompt, keyed as the engines key them: by content.
 *
 * - SGLang writes a value derived from each item's hash into the placeholder token ids
 *   (python/sglang/srt/managers/schedule_batch.py MultimodalDataItem.set_pad_value,
 *   `pad_value = hash % (1 << 30)`), so its radix cache keys include the image; vLLM folds each
 *   item's hash into the block hashes of the blocks it covers (vllm/v1/core/kv_cache_utils.py
 *   generate_block_hash_extra_keys). Either way two prompts with the same text and different
 *   images share no block from the first image on, and the same image matches through it.
 * - Here, as in SGLang, the prompt's placeholder text is derived from the image's digest, so the
 *   cache's chained hashes (kv-cache.ts) and its KV events carry the image. /tokenize answers the
 *   same number of placeholder tokens, the same for every image, as the engines' tokenizers do.
 * - The digest: the bytes of a `data:` URL, the URL string otherwise (an engine would hash the
 *   fetched pixels; the simulator fetches nothing).
 */
import { createHash } from "node:crypto";

/** Characters of one image's placeholder text: about 64 tokens with the stand-in tokenizer. */
const IMAGE_CHARS = 256;
const PLACEHOLDER = "<|image_pad|>";

/** An image part's URL, or undefined when the part is not an image. */
export function imageUrlOf(part: Record<string, unknown>): string | undefined {
  if (part.type !== "image_url") return undefined;
  const value = part.image_url;
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object") {
    const url = (value as Record<string, unknown>).url;
    if (typeof url === "string") return url;
  }
  return undefined;
}

/** The prompt text an image stands as: from its content (`keyed`), or the bare placeholders. */
export function imageText(url: string, keyed: boolean): string {
  const unit = keyed ? imageDigest(url) : PLACEHOLDER;
  return `${unit.repeat(Math.ceil(IMAGE_CHARS / unit.length)).slice(0, IMAGE_CHARS)}\n`;
}

function imageDigest(url: string): string {
  const comma = url.indexOf(",");
  const bytes =
    url.startsWith("data:") && comma > 0 && url.slice(0, comma).endsWith(";base64")
      ? Buffer.from(url.slice(comma + 1), "base64")
      : url;
  return createHash("sha256").update(bytes).digest("hex").slice(0, 32);
}
