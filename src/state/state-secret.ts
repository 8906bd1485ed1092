import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from "node:crypto";

/** Shortest --state-secret accepted (e.g. `openssl rand -hex 32` gives 64). */
export const MIN_STATE_SECRET_CHARS = 16;

/** Format tag of a sealed value, so a later version can change the cipher and still tell. */
const SEALED_PREFIX = "v1.";
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * What the replicas' shared secret (--state-secret) does: it signs everything a replica writes to
 * Redis that a peer acts on (HMAC-SHA256), and seals worker API keys (AES-256-GCM) so that they
 * never sit in Redis in clear. The two keys are derived from the secret with HKDF under distinct
 * labels, so neither use can stand in for the other.
 *
 * A signature covers a `scope` (the Redis key the value lives under, so a signed entry cannot be
 * moved to another fleet's prefix or to another key) and the value's fields in order.
 */
export class StateSecret {
  private readonly macKey: Buffer;
  private readonly sealKey: Buffer;

  constructor(secret: string) {
    if (secret.length < MIN_STATE_SECRET_CHARS)
      throw new RangeError(`state secret must be at least ${MIN_STATE_SECRET_CHARS} characters`);
    const ikm = Buffer.from(secret, "utf8");
    const salt = Buffer.from("radixgate state v1", "utf8");
    this.macKey = Buffer.from(hkdfSync("sha256", ikm, salt, "ops signature", 32));
    this.sealKey = Buffer.from(hkdfSync("sha256", ikm, salt, "worker api key", 32));
  }

  /** The signature of `fields` under `scope` (base64url, 43 characters). */
  sign(scope: string, fields: readonly string[]): string {
    return this.mac(scope, fields).toString("base64url");
  }

  /** Whether `signature` is `sign(scope, fields)`, compared in constant time. */
  verify(scope: string, fields: readonly string[], signature: string): boolean {
    const given = Buffer.from(signature, "base64url");
    const expected = this.mac(scope, fields);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  /** Encrypts `plain`, bound to `context` (e.g. the worker URL: it opens for that worker only). */
  seal(plain: string, context: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv("aes-256-gcm", this.sealKey, iv);
    cipher.setAAD(Buffer.from(context, "utf8"));
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final(), cipher.getAuthTag()]);
    return `${SEALED_PREFIX}${iv.toString("base64url")}.${body.toString("base64url")}`;
  }

  /** The plain text of a sealed value, or undefined if it is malformed or was not sealed for `context`. */
  open(sealed: string, context: string): string | undefined {
    if (!sealed.startsWith(SEALED_PREFIX)) return undefined;
    const [ivText, bodyText, extra] = sealed.slice(SEALED_PREFIX.length).split(".");
    if (ivText === undefined || bodyText === undefined || extra !== undefined) return undefined;
    const iv = Buffer.from(ivText, "base64url");
    const body = Buffer.from(bodyText, "base64url");
    if (iv.length !== IV_BYTES || body.length < TAG_BYTES) return undefined;
    try {
      const decipher = createDecipheriv("aes-256-gcm", this.sealKey, iv);
      decipher.setAAD(Buffer.from(context, "utf8"));
      decipher.setAuthTag(body.subarray(body.length - TAG_BYTES));
      const plain = Buffer.concat([
        decipher.update(body.subarray(0, body.length - TAG_BYTES)),
        decipher.final(),
      ]);
      return plain.toString("utf8");
    } catch {
      return undefined;
    }
  }

  private mac(scope: string, fields: readonly string[]): Buffer {
    // JSON of the list: unambiguous, so no two different field lists sign the same bytes.
    return createHmac("sha256", this.macKey)
      .update(JSON.stringify([scope, ...fields]))
      .digest();
  }
}
