import { isJsonSpace } from "./json-space.js";

/**
 * A JSON object body with one field added as its first (`value` is already JSON); any other body
 * as it is (a body that is not a JSON object is the engine's to refuse). The body is never
 * parsed: the field goes in front, so a later duplicate the client sent would win.
 */
export function bodyWithLeadingField(body: Buffer, name: string, value: string): Buffer {
  return bodyWithLeadingFields(body, [[name, value]]);
}

/**
 * A JSON object body with one field added as its last (`value` is already JSON), so it wins over
 * any field of the same name the client sent (the engines' JSON parsers keep the last); any other
 * body as it is.
 */
export function bodyWithTrailingField(body: Buffer, name: string, value: string): Buffer {
  let end = body.length - 1;
  while (end >= 0 && isJsonSpace(body[end]!)) end--;
  if (end < 0 || body[end] !== 0x7d /* } */) return body;
  let start = 0;
  while (start < end && isJsonSpace(body[start]!)) start++;
  if (body[start] !== 0x7b /* { */) return body;
  let last = end - 1;
  while (last > start && isJsonSpace(body[last]!)) last--;
  const empty = last === start;
  const field = Buffer.from(`${empty ? "" : ","}${JSON.stringify(name)}:${value}`);
  return Buffer.concat([body.subarray(0, end), field, body.subarray(end)]);
}

/** bodyWithLeadingField for several fields at once, in their order: one copy of the body. */
export function bodyWithLeadingFields(
  body: Buffer,
  fields: readonly (readonly [name: string, value: string])[],
): Buffer {
  let start = 0;
  while (start < body.length && isJsonSpace(body[start]!)) start++;
  if (body[start] !== 0x7b /* { */ || fields.length === 0) return body;
  let next = start + 1;
  while (next < body.length && isJsonSpace(body[next]!)) next++;
  const empty = body[next] === 0x7d; /* } */
  const text = fields.map(([name, value]) => `${JSON.stringify(name)}:${value}`).join(",");
  const field = Buffer.from(`${text}${empty ? "" : ","}`);
  return Buffer.concat([body.subarray(0, start + 1), field, body.subarray(start + 1)]);
}
