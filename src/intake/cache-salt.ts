import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { tenantName } from "../admission/identity.js";
import { bodyWithTrailingField } from "../proxy/json-field.js";
import type { PairView } from "../proxy/routing-request.js";
import type { Endpoint } from "./routing-text.js";

/** --cache-isolation: whether tenants may share cached prompt prefixes. */
export const CACHE_ISOLATIONS = ["none", "tenant"] as const;
export type CacheIsolation = (typeof CACHE_ISOLATIONS)[number];

/**
 * The field each engine keys its prefix cache by, per endpoint:
 * - vLLM `cache_salt` on the OpenAI completions and chat requests (vllm/entrypoints/openai/
 *   protocol.py; mixed into the first block's hash, so no block is shared across salts);
 * - SGLang `cache_salt` on the same OpenAI requests (python/sglang/srt/entrypoints/openai/
 *   protocol.py, folded into the request's `extra_key`), and `extra_key` on the native /generate
 *   (GenerateReqInput, python/sglang/srt/managers/io_struct.py), which keys its radix cache.
 * Embeddings are left alone: nothing cached there is read back by another request's answer.
 */
const SALT_FIELD: Partial<Record<Endpoint, string>> = {
  chat: "cache_salt",
  completions: "cache_salt",
  generate: "extra_key",
};

/**
 * The tenant's salt: a hash of its name (the engines' logs never see the name), the same on every
 * replica, so the router's index and the engines' caches split tenants the same way.
 */
export function tenantSalt(headers: IncomingHttpHeaders, tenantHeader: string): string {
  const tenant = tenantName(headers, tenantHeader);
  return `rg-${createHash("sha256").update(tenant).digest("hex").slice(0, 24)}`;
}

/**
 * The body with the tenant's salt as its last field, so a salt the client sent itself (to read
 * another tenant's cache) is overridden; undefined when the endpoint takes none.
 */
export function saltedBody(body: Buffer, endpoint: Endpoint, salt: string): Buffer | undefined {
  const field = SALT_FIELD[endpoint];
  return field === undefined ? undefined : bodyWithTrailingField(body, field, JSON.stringify(salt));
}

/**
 * A prefill/decode pair's bodies with the salt too: vLLM's prefill body and the body rebuilt
 * without the client's hand-off fields come from the parse, not from the salted bytes, and a
 * prefill engine caches what it computes like any other (a salt the client sent there is
 * overridden the same way).
 */
export function saltedPairView(view: PairView, endpoint: Endpoint, salt: string): PairView {
  const salted = (body: Uint8Array | undefined) => {
    if (body === undefined) return undefined;
    const bytes = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    return saltedBody(bytes, endpoint, salt) ?? bytes;
  };
  if (view.prefill === undefined && view.base === undefined) return view;
  return { ...view, prefill: salted(view.prefill), base: salted(view.base) };
}
