import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory()
      ? sources(join(dir, e.name))
      : e.name.endsWith(".ts")
        ? [join(dir, e.name)]
        : [],
  );
}

describe("string builtins the product avoids", () => {
  // Node 24's Maglev tier compiles String.prototype.codePointAt into a read of the next code unit
  // even past the end of a sliced string: a slice ending in a high surrogate whose parent continues
  // with the low one reads as the pair. The interpreter and TurboFan answer right, so it shows only
  // after warm-up (a CI counterexample, once). src/tree/edge-match.ts keyAt reads within the text.
  it("src/ and sim/ never call codePointAt", () => {
    const calls = ["src", "sim"]
      .flatMap((d) => sources(join(ROOT, d)))
      .flatMap((file) =>
        readFileSync(file, "utf8")
          .split("\n")
          .map((line, i) => ({ where: `${file.slice(ROOT.length + 1)}:${i + 1}`, line }))
          .filter(({ line }) => /\.codePointAt\s*\(/.test(line)),
      )
      .map(({ where }) => where);
    expect(calls, "use keyAt (src/tree/edge-match.ts) instead").toEqual([]);
  });
});
