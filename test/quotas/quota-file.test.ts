import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { limitsFor, parseQuotaFile, QuotaFileError } from "../../src/quotas/quota-file.js";

const EXAMPLE = `# tenant quotas
tenants:
  batch:
    tokens_per_minute: 200000
    concurrent_requests: 64
  chat:
    tokens_per_minute: 50000
  ops: {}
others:
  tokens_per_minute: 20000
  concurrent_requests: 8
`;

function errorOf(text: string, path = "q.yaml"): QuotaFileError {
  try {
    parseQuotaFile(text, path);
  } catch (err) {
    if (err instanceof QuotaFileError) return err;
    throw err;
  }
  throw new Error("parsed");
}

/** A row of the file as the parsed table holds it. */
function readBack(row: { tokens_per_minute?: number; concurrent_requests?: number }) {
  return {
    ...(row.tokens_per_minute !== undefined ? { tokensPerMinute: row.tokens_per_minute } : {}),
    ...(row.concurrent_requests !== undefined
      ? { concurrentRequests: row.concurrent_requests }
      : {}),
  };
}

describe("--tenant-quota file", () => {
  it("refuses a file nested deeper than any real one before parsing it", () => {
    expect(() => parseQuotaFile(`tenants: ${"{a: ".repeat(100_000)}`)).toThrow(
      /line 1: nested deeper than 32 levels/,
    );
  });

  it("reads tenants, their limits and the row of the others", () => {
    const table = parseQuotaFile(EXAMPLE, "q.yaml");
    expect(limitsFor(table, "batch")).toEqual({ tokensPerMinute: 200000, concurrentRequests: 64 });
    expect(limitsFor(table, "chat")).toEqual({ tokensPerMinute: 50000 });
    // Listed with no limits: none, whatever `others` says.
    expect(limitsFor(table, "ops")).toEqual({});
    expect(limitsFor(table, "someone")).toEqual({ tokensPerMinute: 20000, concurrentRequests: 8 });
    expect(limitsFor(parseQuotaFile("tenants: {a: {}}"), "b")).toBeUndefined();
    expect(parseQuotaFile("", "q.yaml").tenants.size).toBe(0);
  });

  it("reads the same from JSON", () => {
    const json = JSON.stringify({
      tenants: { batch: { tokens_per_minute: 10 } },
      others: { concurrent_requests: 2 },
    });
    const table = parseQuotaFile(json, "q.json");
    expect(limitsFor(table, "batch")).toEqual({ tokensPerMinute: 10 });
    expect(limitsFor(table, "x")).toEqual({ concurrentRequests: 2 });
  });

  it("names the line and the key of a mistake", () => {
    expect(
      errorOf(EXAMPLE.replace("tokens_per_minute: 50000", "tokens_per_min: 50000")),
    ).toMatchObject({
      line: 7,
      key: "tenants.chat.tokens_per_min",
    });
    expect(errorOf(EXAMPLE.replace("64", "-3")).message).toBe(
      "line 5 (tenants.batch.concurrent_requests): must be a whole number from 1 to 1000000000000, got -3",
    );
    expect(
      errorOf(EXAMPLE.replace("tokens_per_minute: 20000\n", 'tokens_per_minute: "lots"\n')),
    ).toMatchObject({
      line: 10,
      key: "others.tokens_per_minute",
    });
    expect(errorOf("tenants:\n  bad name: {}\n")).toMatchObject({
      line: 2,
      key: "tenants.bad name",
    });
    expect(errorOf("limits: {}\n")).toMatchObject({ line: 1, key: "limits" });
    expect(errorOf("tenants:\n  a: {}\n  a: {}\n").message).toMatch(/^line \d: not valid YAML/);
    expect(errorOf('{"tenants": {', "q.json").message).toMatch(/not valid JSON/);
    expect(errorOf("- a\n- b\n").message).toMatch(/must be an object with `tenants`/);
  });

  it("reads back any table it could be given, in YAML and in JSON (property)", () => {
    const name = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,20}$/);
    const limit = fc.integer({ min: 1, max: 1e12 });
    const limits = fc.record(
      { tokens_per_minute: limit, concurrent_requests: limit },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        fc.dictionary(name, limits, { maxKeys: 20 }),
        fc.option(limits, { nil: undefined }),
        (tenants, others) => {
          const doc = others === undefined ? { tenants } : { tenants, others };
          for (const [text, path] of [
            [stringify(doc), "q.yaml"],
            [JSON.stringify(doc), "q.json"],
          ] as const) {
            const table = parseQuotaFile(text, path);
            expect(table.tenants.size).toBe(Object.keys(tenants).length);
            for (const [tenant, row] of Object.entries(tenants)) {
              expect(table.tenants.get(tenant)).toEqual(readBack(row));
            }
            // The others' row read back too, not only its presence.
            expect(table.others).toEqual(others === undefined ? undefined : readBack(others));
          }
        },
      ),
    );
  });

  it("refuses any other text with a QuotaFileError, never another error (property)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (text) => {
        try {
          parseQuotaFile(text, "q.yaml");
        } catch (err) {
          expect(err).toBeInstanceOf(QuotaFileError);
        }
      }),
    );
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        try {
          parseQuotaFile(JSON.stringify(value) ?? "", "q.json");
        } catch (err) {
          expect(err).toBeInstanceOf(QuotaFileError);
        }
      }),
    );
  });
});
