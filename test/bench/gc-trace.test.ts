import { describe, expect, it } from "vitest";
import { GcTrace, parseGcLine } from "../../bench/lib/gc-trace.js";

describe("GC trace", () => {
  it("reads V8's --trace-gc lines of Node 20 and 24", () => {
    expect(
      parseGcLine(
        "[4242:0x6a1b000]      812 ms: Scavenge 9.8 (12.1) -> 8.9 (13.3) MB, 0.91 / 0.00 ms  (average mu = 1.000, current mu = 1.000) allocation failure;",
      ),
    ).toEqual({ beforeMb: 9.8, afterMb: 8.9 });
    expect(
      parseGcLine(
        "[4242:0x6a1b000]     1300 ms: Mark-Compact (reduce) 20.5 (24.0) -> 11.2 (21.0) MB, pooled: 0 MB, 5.1 / 0.0 ms",
      ),
    ).toEqual({ beforeMb: 20.5, afterMb: 11.2 });
    expect(parseGcLine('{"level":30,"msg":"request"}')).toBeUndefined();
  });

  it("counts what was allocated between collections inside a window", () => {
    const trace = new GcTrace();
    trace.onLine("[1:0x1]  10 ms: Scavenge 10.0 (12.0) -> 4.0 (12.0) MB, 1 / 0 ms");
    const mark = trace.mark();
    trace.onLine("[1:0x1]  20 ms: Scavenge 12.0 (14.0) -> 5.0 (14.0) MB, 1 / 0 ms");
    trace.onLine("[1:0x1]  30 ms: Scavenge 13.0 (14.0) -> 6.0 (14.0) MB, 1 / 0 ms");
    // (12 - 4) + (13 - 5) MB
    expect(trace.allocatedSince(mark)).toEqual({ bytes: 16 * 1024 * 1024, collections: 2 });
  });
});
