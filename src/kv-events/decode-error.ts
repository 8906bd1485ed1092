/** A KV-event message that is not what the engines send: counted and skipped by the caller. */
export class KvDecodeError extends Error {
  override readonly name = "KvDecodeError";
}
