import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listeningUrl, SERVE_LOCALLY } from "../helpers/cli.js";

const run = promisify(execFile);
const ROOT = new URL("../../", import.meta.url).pathname;

/**
 * What a user gets from the registry: `npm pack` (prepack builds dist/), then the tarball run
 * with npx from an unrelated project in a temp directory. Dependencies come from the npm cache
 * that `npm ci` filled (--prefer-offline), so no network is needed in CI.
 */
describe("npm package", () => {
  let dir: string;
  let tarball: string;
  const npx = (args: string[]) =>
    ["--yes", "--prefer-offline", "--package", tarball, "--", "radixgate", ...args] as const;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-pack-"));
    const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", dir], {
      cwd: ROOT,
    });
    tarball = join(dir, stdout.trim().split("\n").pop()!);
    // A caller project with its own version: --version must not print it.
    await writeFile(
      join(dir, "package.json"),
      JSON.stringify({ name: "caller", version: "9.9.9", private: true }),
    );
  }, 120_000);
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("contains the built CLI, the health check, LICENSE and README, and no sources or tests", async () => {
    const { stdout } = await run("tar", ["-tzf", tarball]);
    const files = stdout.split("\n");
    for (const f of [
      "package/dist/cli.js",
      "package/dist/healthcheck.js",
      "package/LICENSE",
      "package/README.md",
      "package/package.json",
    ])
      expect(files, f).toContain(f);
    expect(files.some((f) => f.startsWith("package/src/") || f.startsWith("package/test/"))).toBe(
      false,
    );
    const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    expect(pkg.private).toBeUndefined();
    expect(pkg.license).toBe("Apache-2.0");
  });

  it("npx radixgate --version prints our version, not the calling project's", async () => {
    const pkg = JSON.parse(await readFile(join(ROOT, "package.json"), "utf8"));
    const { stdout } = await run("npx", [...npx(["--version"])], { cwd: dir });
    expect(stdout.trim()).toBe(pkg.version);
  }, 60_000);

  it("npx radixgate starts from the tarball; SIGTERM to npx stops the router too (no orphan)", async () => {
    const child = spawn("npx", [...npx(SERVE_LOCALLY)], {
      cwd: dir,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    const url = await listeningUrl(child, 45_000);
    expect((await fetch(`${url}/health`)).status).toBe(200);
    // npm dies of the signal itself, and its `sh -c` never passes it on: the router notices its
    // parent is gone and stops as on SIGTERM, so nothing is left listening.
    child.kill("SIGTERM");
    await exited;
    const stopBy = Date.now() + 15_000;
    let listening = true;
    while (listening && Date.now() < stopBy) {
      listening = await fetch(`${url}/health`).then(
        () => true,
        () => false,
      );
      if (listening) await new Promise((r) => setTimeout(r, 100));
    }
    expect(listening).toBe(false);
  }, 60_000);
});
