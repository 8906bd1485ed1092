import { afterAll, describe, expect, it } from "vitest";
import { RouterError } from "../../src/errors.js";
import { ParsePool } from "../../src/intake/parse-pool.js";

const pool = new ParsePool({ size: 1, memoryMb: 16 });
afterAll(() => pool.close());

describe("ParsePool: a body that exhausts a parser's heap ends only that parser", () => {
  it("answers 413 payload_too_large, this process goes on, and the next body gets a fresh parser", async () => {
    // Six million small objects (48 MB): parsing them needs far more than 16 MB. In a worker
    // thread this ended the whole process with V8's fatal "Reached heap limit" (Node 20 and 24).
    const huge = Buffer.from(`{"prompt": "x", "junk": [${'{"a":1},'.repeat(6_000_000)}{"a":1}]}`);
    const refused = await pool.summarize("completions", huge, 1000).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(RouterError);
    expect((refused as RouterError).code).toBe("payload_too_large");
    expect((refused as RouterError).message).toContain("--parse-worker-memory-mb");
    const summary = await pool.summarize("completions", Buffer.from('{"prompt": "after"}'), 1000);
    expect(summary.text).toContain("after");
    expect(pool.completed).toBe(1);
  }, 120_000);
});
