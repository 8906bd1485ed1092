/**
 * What an engine's info answer must lose before a client sees it. SGLang's GET /get_server_info
 * returns its whole ServerArgs (python/sglang/srt/server_args.py), which include `api_key`,
 * `admin_api_key`, `ssl_keyfile`, `ssl_keyfile_password` and, in extra-config strings, URLs
 * that may carry credentials. Every answer the router relays from an engine's info endpoints, or
 * aggregates from them, goes through `withoutSecrets` first.
 */

/** Words that make a field secret wherever they appear in its name (snake, kebab or camel case). */
const SECRET_WORDS: ReadonlySet<string> = new Set([
  "key",
  "keys",
  "apikey",
  "keyfile",
  "secret",
  "secrets",
  "password",
  "passwd",
  "pwd",
  "passphrase",
  "token",
  "credential",
  "credentials",
  "auth",
  "authorization",
  "bearer",
  "cookie",
  "signature",
  "salt",
  "private",
]);

/** Whether a field of this name may hold a key, token, password or similar (so it is dropped). */
export function isSecretField(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/);
  return words.some((word) => SECRET_WORDS.has(word));
}

/** `scheme://user:password@host` (the userinfo part of a URL), anywhere in a string. */
const URL_USERINFO = /([a-z][a-z0-9+.-]*:\/\/)[^/\s@"']*@/gi;

/** Deepest nesting copied; anything deeper is cut (an engine's info answer is a few levels). */
const MAX_DEPTH = 32;

/**
 * A copy of a JSON value with every secret field removed (at any depth) and the credentials of any
 * URL inside a string replaced by `***`. Arrays and objects are copied, never changed in place.
 */
export function withoutSecrets(value: unknown, depth = 0): unknown {
  if (typeof value === "string") return value.replace(URL_USERINFO, "$1***@");
  if (value === null || typeof value !== "object") return value;
  if (depth >= MAX_DEPTH) return null;
  if (Array.isArray(value)) return value.map((item) => withoutSecrets(item, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [name, field] of Object.entries(value)) {
    if (isSecretField(name)) continue;
    out[name] = withoutSecrets(field, depth + 1);
  }
  return out;
}
