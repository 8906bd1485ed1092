import { describe, expect, it } from "vitest";
import {
  CLAIM_BLOCK_CHARS as B,
  newPrefixClaimEnd,
  newPrefixClaimKey,
  newPrefixClaimValue,
  readNewPrefixClaim,
} from "../../src/scheduling/new-prefix-claim.js";

describe("newPrefixClaimEnd (when a decision needs the replicas to agree)", () => {
  it("claims a text nobody holds: up to the second block boundary", () => {
    expect(newPrefixClaimEnd(10 * B, [0, 0, 0], 3)).toBe(2 * B);
  });

  it("claims past a prefix every worker holds (a shared tools prompt), and the same prefix for nearby matches", () => {
    expect(newPrefixClaimEnd(100 * B, [48 * B, 48 * B, 48 * B], 3)).toBe(50 * B);
    expect(newPrefixClaimEnd(100 * B, [48 * B + 5, 48 * B, 48 * B], 3)).toBe(50 * B);
  });

  it("needs no claim when the index singles out one worker by at least a block", () => {
    expect(newPrefixClaimEnd(100 * B, [60 * B, 48 * B, 48 * B], 3)).toBe(-1);
  });

  it("needs no claim with one candidate, or when less than about two blocks are new", () => {
    expect(newPrefixClaimEnd(100 * B, [0], 1)).toBe(-1);
    expect(newPrefixClaimEnd(B + 10, [0, 0], 2)).toBe(-1);
    expect(newPrefixClaimEnd(50 * B, [49 * B, 49 * B], 2)).toBe(-1);
  });

  it("reads only the first `count` matches (the decider's scratch array may be longer)", () => {
    expect(newPrefixClaimEnd(10 * B, [0, 0, 9 * B], 2)).toBe(2 * B);
  });
});

describe("newPrefixClaimKey", () => {
  const shared = "s".repeat(2 * B);
  it("names the same prefix for texts that differ only past its end", () => {
    expect(newPrefixClaimKey(undefined, `${shared}first question`, 2 * B)).toBe(
      newPrefixClaimKey(undefined, `${shared}second question`, 2 * B),
    );
  });

  it("keeps models (and different prefixes) apart", () => {
    const text = `${shared}question`;
    expect(newPrefixClaimKey("a", text, 2 * B)).not.toBe(newPrefixClaimKey("b", text, 2 * B));
    expect(newPrefixClaimKey(undefined, text, 2 * B)).not.toBe(
      newPrefixClaimKey(undefined, `t${text}`, 2 * B),
    );
  });
});

describe("newPrefixClaimValue / readNewPrefixClaim", () => {
  const tools = "t".repeat(1000);
  it("tells a follower the claimer's worker and how much of its own text the claimer's shares (a ladder rung below)", () => {
    const value = newPrefixClaimValue("w7", 2500, `${tools}${"a".repeat(3000)}`);
    expect(readNewPrefixClaim(value, `${tools}${"b".repeat(3000)}`)).toEqual({
      worker: "w7",
      shared: 768,
      queued: 2500,
    });
    const same = `${tools}${"a".repeat(3000)}`;
    expect(readNewPrefixClaim(value, same)?.shared).toBe(3072);
  });

  it("shares nothing past a text shorter than the claimer's", () => {
    const value = newPrefixClaimValue("w7", 0, `${tools}${"a".repeat(3000)}`);
    expect(readNewPrefixClaim(value, tools.slice(0, 300))?.shared).toBe(256);
  });

  it("reads an older replica's value (no queued prefill) as having queued nothing", () => {
    const text = `${tools}${"a".repeat(3000)}`;
    const older = newPrefixClaimValue("w7", 900, text).replace("|900|", "|");
    expect(readNewPrefixClaim(older, text)).toEqual({ worker: "w7", shared: 3072, queued: 0 });
  });

  it("a value it cannot read is no claim", () => {
    expect(readNewPrefixClaim("w7", "text")).toBeUndefined();
    expect(readNewPrefixClaim("w7|x:abc", "text")).toBeUndefined();
    expect(readNewPrefixClaim("|128:abc", "text")).toBeUndefined();
    expect(readNewPrefixClaim("w7|-3|128:abc", "text")).toBeUndefined();
  });
});
