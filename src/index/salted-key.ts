/**
 * An index key under a tenant's cache salt (--cache-isolation tenant): the salt first, then the
 * model or adapter key, so the approximate trees root each tenant's prompts apart, and the precise
 * index can take the salt back out to seed the block chain as the engine does (block-keys.ts
 * rootKey). Salts are "rg-" and 24 hex digits (intake/cache-salt.ts tenantSalt makes them).
 */

const SALTED = /^(rg-[0-9a-f]{24})(?:\/(.*))?$/s;

/** `key` under `salt`; `key` itself without one. */
export function saltedKey(key: string | undefined, salt: string | undefined): string | undefined {
  if (salt === undefined) return key;
  return key === undefined ? salt : `${salt}/${key}`;
}

/** The salt and the model or adapter key of an index key (the salt undefined when it has none). */
export function splitSalted(model: string | undefined): {
  salt: string | undefined;
  key: string | undefined;
} {
  const m = model === undefined || !model.startsWith("rg-") ? null : SALTED.exec(model);
  if (m === null) return { salt: undefined, key: model };
  return { salt: m[1], key: m[2] };
}
