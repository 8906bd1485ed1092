/** Builds another git ref of the router for before/after benches (bench:overhead-ab, bench:stream). */
import { execFileSync, execSync } from "node:child_process";
import { mkdtempSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

/** Builds `ref` into a temporary directory (its own sources, this checkout's node_modules). */
export function buildRef(ref: string): { cli: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "radixgate-ab-"));
  execSync(`git archive ${JSON.stringify(ref)} | tar -x -C ${JSON.stringify(dir)}`, { cwd: ROOT });
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  console.log(`building ${ref} in ${dir} ...`);
  // The same build command as this checkout's (built-router.ts: ensureBuilt).
  execFileSync("npm", ["run", "build", "--silent"], { cwd: dir, stdio: "inherit" });
  return { cli: join(dir, "dist", "cli.js"), dir };
}
