import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const SCRIPT = new URL("../../scripts/check-built.mjs", import.meta.url).pathname;

describe("npm start before npm run build (prestart: scripts/check-built.mjs)", () => {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-prestart-"));
  mkdirSync(join(dir, "scripts"));
  copyFileSync(SCRIPT, join(dir, "scripts", "check-built.mjs"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("says to build first, in one line, and exits 1 (no module-not-found stack)", () => {
    const run = spawnSync(process.execPath, [join(dir, "scripts", "check-built.mjs")], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status).toBe(1);
    expect(run.stderr.trim().split("\n")).toHaveLength(1);
    expect(run.stderr).toContain("npm run build");
  });

  it("lets npm start go on once dist/cli.js exists", () => {
    mkdirSync(join(dir, "dist"));
    writeFileSync(join(dir, "dist", "cli.js"), "");
    const run = spawnSync(process.execPath, [join(dir, "scripts", "check-built.mjs")], {
      encoding: "utf8",
      timeout: 20_000,
    });
    expect(run.status).toBe(0);
  });
});
