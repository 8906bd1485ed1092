import { afterAll, describe, expect, it } from "vitest";
import { IsolatedParser } from "../../src/watched-file/isolated-parse.js";

const fixtures = new URL("./fixture-parsers.ts", import.meta.url).href;
const parser = new IsolatedParser({ memoryMb: 32, timeoutMs: 20_000 });
const quick = new IsolatedParser({ memoryMb: 32, timeoutMs: 3000 });
afterAll(() => {
  parser.close();
  quick.close();
});

describe("IsolatedParser: a parser that misbehaves dies alone", () => {
  it("returns the parser's value (Maps survive) and its error message", async () => {
    await expect(parser.parse({ module: fixtures, name: "echo" }, "t", "p.yaml")).resolves.toEqual({
      text: "t",
      path: "p.yaml",
      tenants: new Map([["a", 1]]),
    });
    await expect(parser.parse({ module: fixtures, name: "refuse" }, "this", "p")).rejects.toThrow(
      "refused this",
    );
  }, 60_000);

  it("a parser that exhausts its heap is reported; this process goes on", async () => {
    await expect(parser.parse({ module: fixtures, name: "exhaustHeap" }, "", "p")).rejects.toThrow(
      /more than 32 MB|the parser/,
    );
    // The next parse gets a fresh thread.
    await expect(parser.parse({ module: fixtures, name: "refuse" }, "again", "p")).rejects.toThrow(
      "refused again",
    );
  }, 60_000);

  it("a parser that never returns is stopped at the timeout", async () => {
    await expect(quick.parse({ module: fixtures, name: "spin" }, "", "p")).rejects.toThrow(
      /longer than 3000 ms/,
    );
  }, 60_000);
});
