/**
 * The deepest array/object nesting of a parsed JSON value, measured without recursion: V8 parses
 * any depth iteratively, but JSON.stringify recurses and throws a RangeError (a 500) on a value
 * nested some thousands deep. Whatever serializes a client's value again checks it first.
 */
export const MAX_NESTING_DEPTH = 128;

/** Whether `value` nests deeper than `limit` levels (a scalar is 0, `[]` or `{}` is 1). */
export function nestsDeeperThan(value: unknown, limit: number = MAX_NESTING_DEPTH): boolean {
  const stack: Array<{ value: unknown; depth: number }> = [{ value, depth: 1 }];
  while (stack.length > 0) {
    const { value: v, depth } = stack.pop() as { value: unknown; depth: number };
    if (v === null || typeof v !== "object") continue;
    if (depth > limit) return true;
    const children = Array.isArray(v) ? v : Object.values(v);
    for (const child of children) {
      if (child !== null && typeof child === "object")
        stack.push({ value: child, depth: depth + 1 });
    }
  }
  return false;
}
