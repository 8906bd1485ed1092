import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { closestFlag } from "../src/cli-error.js";
import { COMPAT_FLAGS } from "../src/compat-flags.js";
import { SETTINGS } from "../src/config.js";

const KNOWN = [...SETTINGS.map((s) => s.flag), ...COMPAT_FLAGS.map((c) => c.flag)];

describe("closestFlag (the 'did you mean' of an unknown flag)", () => {
  it("suggests the flag for one typo: a dropped, doubled or swapped character", () => {
    expect(closestFlag("--polcy")).toBe("--policy");
    expect(closestFlag("--worker-urlss")).toBe("--worker-urls");
    expect(closestFlag("--cahce-threshold")).toBe("--cache-threshold");
    expect(closestFlag("--disable-retires")).toBe("--disable-retries");
    expect(closestFlag("--polcy=random")).toBe("--policy");
  });

  it("suggests nothing for a known flag or a name far from every flag", () => {
    expect(closestFlag("--policy")).toBeUndefined();
    expect(closestFlag("--zzz")).toBeUndefined();
    expect(closestFlag("--completely-unrelated-thing")).toBeUndefined();
  });

  it("any input: no throw, and a suggestion is a known flag within 3 edits", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), (typed) => {
        const suggestion = closestFlag(typed);
        if (suggestion !== undefined) expect(KNOWN).toContain(suggestion);
      }),
    );
  });

  it("a known flag with one character deleted suggests a flag (the same one unless another is as close)", () => {
    fc.assert(
      fc.property(fc.constantFrom(...KNOWN.filter((f) => f.length >= 10)), fc.nat(), (flag, at) => {
        const i = 2 + (at % (flag.length - 2));
        const typo = flag.slice(0, i) + flag.slice(i + 1);
        if (KNOWN.includes(typo)) return;
        expect(closestFlag(typo)).toBeDefined();
      }),
    );
  });
});
