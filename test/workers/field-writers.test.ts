import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";

const SRC = join(import.meta.dirname, "..", "..", "src");

/**
 * Worker's fields that stay plain properties because code in src/workers/ writes them (health
 * checks, the registry, introspection, tree budgets); the rest are getters with no setter, which
 * TypeScript already guards. Written as `x.field = ...`, `+=`, `-=`, `++` or `--`.
 */
const FIELDS = [
  "healthy",
  "healthFailures",
  "healthSuccesses",
  "removed",
  "treeBudget",
  "servedModels",
];
const WRITE = new RegExp(`\\.(${FIELDS.join("|")})\\s*(=(?!=)|\\+=|-=|\\+\\+|--)`);

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

describe("Worker's fields", () => {
  it("are written only in src/workers/ (issue 21: everything else reads them)", () => {
    const writers: string[] = [];
    for (const path of sources(SRC)) {
      const file = relative(SRC, path);
      if (file.startsWith("workers/")) continue;
      readFileSync(path, "utf8")
        .split("\n")
        .forEach((line, i) => {
          if (WRITE.test(line)) writers.push(`src/${file}:${i + 1}: ${line.trim()}`);
        });
    }
    expect(writers).toEqual([]);
  });
});
