import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { usageOf } from "../../bench/lib/entry.js";

describe("a benchmark's usage", () => {
  it("is its file's opening block comment, without the comment's stars", () => {
    const dir = mkdtempSync(join(tmpdir(), "rg-usage-"));
    const file = join(dir, "b.ts");
    writeFileSync(
      file,
      '/**\n * What it measures.\n *\n *   npm run bench:b -- --x\n */\nimport "x";\n',
    );
    expect(usageOf(file)).toBe("What it measures.\n\n  npm run bench:b -- --x");
    writeFileSync(file, "const a = 1;\n");
    expect(usageOf(file)).toMatch(/^no usage written in /);
  });

  it("answers --help with it, and an unknown flag with one line and it, never a stack trace", () => {
    const run = (flag: string) =>
      spawnSync(process.execPath, ["--import", "tsx", "bench/refusal-cost.ts", flag], {
        encoding: "utf8",
        timeout: 30_000,
      });
    const help = run("--help");
    expect(help.status).toBe(0);
    expect(help.stderr).toContain(usageOf("bench/refusal-cost.ts").split("\n")[0]);
    expect(help.stderr).not.toMatch(/^\s+at /m);
    const unknown = run("--no-such-flag");
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--no-such-flag'/);
    expect(unknown.stderr).not.toMatch(/^\s+at /m);
  });
});
