/**
 * How deep a configuration file may nest. Real files (worker lists, tenant quotas, scheduler
 * profiles) nest 3 to 6 levels; a parser fed 100k levels runs out of stack or memory, so a file
 * deeper than this is refused before any parser sees it.
 */
export const MAX_FILE_NESTING = 32;

/**
 * Throws an Error naming the line where a YAML or JSON text nests deeper than `maxDepth`
 * (block indentation, compact `- - -` sequences and `[`/`{` flow collections together). One
 * linear pass with no recursion; quoted scalars and comments are skipped, so brackets inside
 * them do not count. It may over-count a plain scalar holding brackets (`a[[[`), which no real
 * file nests 32 deep.
 */
export function checkNesting(text: string, maxDepth = MAX_FILE_NESTING): void {
  const indents: number[] = [];
  let flow = 0;
  /** The block level of the line being read (flow collections nest inside it). */
  const block = 0;
  let quote: "'" | '"' | undefined;
  let line = 1;
  let at = 0;
  const refuse = (): never => {
    throw new Error(`line ${line}: nested deeper than ${maxDepth} levels`);
  };
  while (at < text.length) {
    const end = text.indexOf("\n", at) === -1 ? text.length : text.indexOf("\n", at);
    let i = at;
    if (quote === undefined && flow === 0) {
      while (i < end && text[i] === " ") i++;
      const blank = i >= end || text[i] === "#" || text[i] === "\r";
      if (!blank) {
        const indent = i - at;
        while (indents.length > 0 && (indents.at(-1) as number) >= indent) indents.pop();
        indents.push(indent);
        let depth = indents.length;
        // Compact nesting on one line: "- - - x", "? - x".
        while (
          i < end &&
          (text[i] === "-" || text[i] === "?") &&
          /[ \t\r]/.test(text[i + 1] ?? " ")
        ) {
          depth++;
          i += 2;
          while (i < end && text[i] === " ") i++;
        }
        if (depth > maxDepth) refuse();
      }
    }
    for (; i < end; i++) {
      const c = text[i];
      if (quote === '"') {
        if (c === "\\") i++;
        else if (c === '"') quote = undefined;
        continue;
      }
      if (quote === "'") {
        if (c === "'" && text[i + 1] === "'") i++;
        else if (c === "'") quote = undefined;
        continue;
      }
      const before = i === at ? " " : (text[i - 1] as string);
      if (c === "#" && /\s/.test(before)) break;
      if ((c === '"' || c === "'") && /[\s[{,:]/.test(before)) quote = c;
      else if (c === "[" || c === "{") {
        if (++flow + block > maxDepth) refuse();
      } else if ((c === "]" || c === "}") && flow > 0) flow--;
    }
    at = end + 1;
    line++;
  }
}
