/** Builds another git ref of the router for before/after benches (bench:overhead-ab, bench:stream). */
import { execFileSync, execSync } from "node:child_process";
import { mkdtempSync, readFileSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/**
 * Builds `ref` into a temporary directory: its own sources, and this checkout's node_modules when
 * the two lock files agree; otherwise its own install, since a ref from before a dependency
 * upgrade does not build against the new packages.
 */
export function buildRef(ref: string): { cli: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-ab-"));
  execSync(`git archive ${JSON.stringify(ref)} | tar -x -C ${JSON.stringify(dir)}`, { cwd: ROOT });
  const sameLock =
    readFileSync(join(dir, "package-lock.json"), "utf8") ===
    readFileSync(join(ROOT, "package-lock.json"), "utf8");
  if (sameLock) symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  else {
    console.log(`installing ${ref}'s own dependencies (its package-lock.json differs) ...`);
    execFileSync("npm", ["ci", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
  }
  console.log(`building ${ref} in ${dir} ...`);
  // The same build command as this checkout's (built-router.ts: ensureBuilt).
  execFileSync("npm", ["run", "build", "--silent"], { cwd: dir, stdio: "inherit" });
  return { cli: join(dir, "dist", "cli.js"), dir };
}
