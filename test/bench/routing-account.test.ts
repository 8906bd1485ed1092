import { describe, expect, it } from "vitest";
import { parsePdCli, parsePdPolicies } from "../../bench/lib/pd-workload.js";
import { accountTable } from "../../bench/lib/routing-account.js";
import { emptyTotals } from "../../src/cache-account/account-totals.js";

describe("bench:routing's cache account table (issue 26 item 5)", () => {
  it("gives every row a line; a row with nothing accounted says why instead of only dashes", () => {
    const held = emptyTotals();
    held.requests = 4;
    held.prompt = 100;
    held.reported = 60;
    held.cold = 40;
    const { cells, notes } = accountTable([
      { row: "round_robin", requests: 96, account: undefined },
      { row: "cache_aware", requests: 96, account: held },
    ]);
    expect(cells.map((c) => c[0])).toEqual(["round_robin", "cache_aware"]);
    expect(cells[0]![1]).toBe(0);
    expect(cells[1]!.slice(1, 3)).toEqual([4, "60.0%"]);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatch(
      /round_robin: 0 of 96 requests accounted: its policy reads no prefix index/,
    );
  });
});

describe("bench:routing --workload pd --policies", () => {
  it("a valid prefill policy is a row, round_robin included", () => {
    expect(parsePdPolicies("round_robin")).toEqual(["round_robin"]);
    expect(parsePdPolicies("prefix_cost,round_robin")).toEqual(["prefix_cost", "round_robin"]);
    expect(parsePdCli(["--workload", "pd", "--policies", "round_robin"]).rows).toEqual([
      "round_robin",
    ]);
  });

  it("an unknown name is an error naming it, not a silent row-less run", () => {
    expect(() => parsePdPolicies("round-robin")).toThrow(/unknown prefill policy "round-robin"/);
    expect(() => parsePdPolicies("cache_aware,")).toThrow(/unknown prefill policy ""/);
  });

  it("a count that is not a whole number is an error (it ran no repeat before)", () => {
    expect(() => parsePdCli(["--workload", "pd", "--repeats", "x"])).toThrow(/--repeats/);
    expect(() => parsePdCli(["--workload", "pd", "--prefill-workers", "0"])).toThrow(
      /--prefill-workers/,
    );
  });
});
