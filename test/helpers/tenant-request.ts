import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A --tenant-quota file holding `text`, in a directory of its own. */
export function quotaFile(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), "radixgate-quota-")), "quota.yaml");
  writeFileSync(path, text);
  return path;
}

/**
 * A completion sent as `tenant` (x-tenant-id), its prompt padded to `chars` characters (400
 * unless told) so that its charge is predictable.
 */
export function askAsTenant(
  routerUrl: string,
  tenant: string,
  options: { chars?: number; maxTokens?: number; stream?: boolean } = {},
): Promise<Response> {
  return fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-tenant-id": tenant },
    body: JSON.stringify({
      model: "m",
      prompt: `${tenant} `.padEnd(options.chars ?? 400, "x"),
      max_tokens: options.maxTokens ?? 10,
      stream: options.stream ?? false,
    }),
  });
}
