/** Parsers for isolated-parse tests: each misbehaves the way a hostile file could make a parser. */
export function echo(text: string, path: string): unknown {
  return { text, path, tenants: new Map([["a", 1]]) };
}

export function refuse(text: string): unknown {
  throw new Error(`refused ${text}`);
}

export function exhaustHeap(): unknown {
  const hoard: number[][] = [];
  for (;;) hoard.push(new Array(1_000_000).fill(1));
}

export function spin(): unknown {
  for (;;) {}
}
