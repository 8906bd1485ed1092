import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { checkNesting } from "../../src/watched-file/nesting.js";

/** A YAML value nested exactly `depth` levels, in a mix of flow and block styles. */
function nested(depth: number, styles: boolean[]): string {
  let text = "x";
  for (let level = 0; level < depth; level++) {
    text = styles[level % styles.length] ? `[${text}]` : `{k: ${text}}`;
  }
  return text;
}

function blockNested(depth: number): string {
  return `${Array.from({ length: depth }, (_, i) => `${"  ".repeat(i)}k${i}:`).join("\n")} x\n`;
}

describe("checkNesting", () => {
  it("passes real files and refuses hostile depth in every style, naming the line", () => {
    expect(() => checkNesting("workers:\n  - url: http://a:1\n    api_key: k\n")).not.toThrow();
    expect(() => checkNesting('["http://[::1]:8000", {"url": "x"}]')).not.toThrow();
    expect(() => checkNesting("[".repeat(100_000))).toThrow(/line 1: nested deeper than 32/);
    expect(() => checkNesting("- ".repeat(100_000))).toThrow(/line 1: nested deeper/);
    expect(() => checkNesting(`a: 1\n${blockNested(40)}`)).toThrow(/line 34: nested deeper/);
    expect(() => checkNesting(`${"{a: ".repeat(50)}`)).toThrow(/nested deeper/);
  });

  it("quoted scalars and comments do not count", () => {
    const brackets = "[".repeat(1000);
    expect(() => checkNesting(`- "${brackets}"\n- '${brackets}'\n# ${brackets}\n`)).not.toThrow();
    expect(() => checkNesting(`["a\\"${brackets}", 'it''s ${brackets}']`)).not.toThrow();
  });

  it("agrees with the parsed depth: up to the bound passes, beyond it is refused", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        (depth, styles) => {
          const text = nested(depth, styles);
          expect(parse(text)).toBeDefined();
          if (depth <= 32) expect(() => checkNesting(text)).not.toThrow();
          else expect(() => checkNesting(text)).toThrow(/nested deeper than 32/);
        },
      ),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 60 }), (depth) => {
        if (depth <= 32) expect(() => checkNesting(blockNested(depth))).not.toThrow();
        else expect(() => checkNesting(blockNested(depth))).toThrow(/nested deeper/);
      }),
    );
  });
});
