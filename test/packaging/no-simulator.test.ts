/**
 * Issue 21 item 6: the simulator (sim/) is not in the package. The build runs from a clean
 * checkout's point of view: tsconfig.build.json compiles into an empty temp dist/ (a developer's
 * dist/ may still hold output from before the move), then `npm pack --dry-run --json` lists what
 * package.json's `files` would ship from there.
 */
import { execFile } from "node:child_process";
import { cp, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = new URL("../../", import.meta.url).pathname;
const TSC = join(ROOT, "node_modules", ".bin", "tsc");

interface PackEntry {
  files: { path: string }[];
}

describe("npm pack --dry-run", () => {
  let dir: string;
  let packed: string[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-nosim-"));
    await run(TSC, ["-p", join(ROOT, "tsconfig.build.json"), "--outDir", join(dir, "dist")], {
      cwd: ROOT,
    });
    for (const f of ["package.json", "README.md", "LICENSE", "docs/grafana"])
      await cp(join(ROOT, f), join(dir, f), { recursive: true });
    // --ignore-scripts: prepack would build into this checkout's dist/, not the clean one here.
    const { stdout } = await run("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
      cwd: dir,
    });
    const [entry] = JSON.parse(stdout) as PackEntry[];
    packed = entry!.files.map((f) => f.path);
  }, 180_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("lists the built router and no simulator file", async () => {
    expect(packed).toContain("dist/cli.js");
    expect(packed).toContain("dist/server.js");
    const simulator = await readdir(join(ROOT, "sim"));
    expect(simulator).toContain("worker.ts");
    expect(packed.filter((p) => /(^|\/)sim\//.test(p))).toEqual([]);
    // The helpers that moved with it (the KV-event encoder, free-port, the redis-server launcher).
    expect(
      packed.filter((p) => /(encode|kv-event-encoder|free-port|redis-server)\.js$/.test(p)),
    ).toEqual([]);
  });

  it("ships compiled router sources only: every packed .js has its .ts in src/", async () => {
    const js = packed.filter((p) => p.endsWith(".js"));
    expect(js.length).toBeGreaterThan(50);
    const sources = new Set(
      (await readdir(join(ROOT, "src"), { recursive: true })).map((p) => p.replace(/\\/g, "/")),
    );
    const orphans = js.filter(
      (p) => !sources.has(p.replace(/^dist\//, "").replace(/\.js$/, ".ts")),
    );
    expect(orphans).toEqual([]);
  });
});
