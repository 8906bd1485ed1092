/**
 * One operation shared between replicas through the ops stream. Index operations name the worker
 * by id (a hash of its canonical URL, the same on every replica); membership operations carry the
 * URL itself, so that a replica that never saw the worker can add it.
 */
export type StateOp =
  | {
      readonly kind: "insert";
      readonly worker: string;
      readonly model?: string;
      readonly text: string;
    }
  | {
      readonly kind: "truncate";
      readonly worker: string;
      readonly model?: string;
      readonly text: string;
      readonly keep: number;
    }
  | { readonly kind: "add"; readonly url: string }
  | { readonly kind: "remove"; readonly url: string };

/** Field codes of a stream entry (short: they are repeated in every entry). */
const KIND_CODE = { insert: "i", truncate: "t", add: "a", remove: "d" } as const;
const CODE_KIND = { i: "insert", t: "truncate", a: "add", d: "remove" } as const;

/** The XADD field list of an op: r <replica> k <kind> then the op's own fields. */
export function encodeOp(replica: string, op: StateOp): string[] {
  const fields = ["r", replica, "k", KIND_CODE[op.kind]];
  switch (op.kind) {
    case "insert":
    case "truncate":
      fields.push("w", op.worker, "x", op.text);
      if (op.model !== undefined) fields.push("m", op.model);
      if (op.kind === "truncate") fields.push("n", String(op.keep));
      break;
    case "add":
    case "remove":
      fields.push("u", op.url);
      break;
  }
  return fields;
}

/** A stream entry's fields back to (replica, op); undefined for an entry this version cannot read. */
export function decodeOp(fields: readonly string[]): { replica: string; op: StateOp } | undefined {
  const get = (name: string): string | undefined => {
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
    return undefined;
  };
  const replica = get("r");
  const code = get("k");
  if (replica === undefined || code === undefined || !(code in CODE_KIND)) return undefined;
  const kind = CODE_KIND[code as keyof typeof CODE_KIND];
  if (kind === "add" || kind === "remove") {
    const url = get("u");
    return url === undefined ? undefined : { replica, op: { kind, url } };
  }
  const worker = get("w");
  const text = get("x");
  if (worker === undefined || text === undefined) return undefined;
  const model = get("m");
  const base = model === undefined ? { worker, text } : { worker, text, model };
  if (kind === "insert") return { replica, op: { kind, ...base } };
  const keep = Number(get("n"));
  if (!Number.isInteger(keep) || keep < 0) return undefined;
  return { replica, op: { kind, ...base, keep } };
}

/** The first `max` characters of `text`, never ending inside a surrogate pair. */
export function boundedText(text: string, max: number): string {
  if (text.length <= max) return text;
  const code = text.charCodeAt(max - 1);
  const end = code >= 0xd800 && code <= 0xdbff ? max - 1 : max;
  return text.slice(0, end);
}
