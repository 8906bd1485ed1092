/**
 * Issue 19 item 8: the README's `/debug/route` example works as written. The curl command is
 * read from README.md (with its continuation lines) and run by a shell, in an empty directory,
 * against the demo fleet; only the port is changed (the demo takes a free one). It used to post
 * `@request.json`, a file the README never showed, so pasted as written it sent an empty body.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Demo, startDemo } from "../../scripts/demo.js";

const ROOT = new URL("../../", import.meta.url).pathname;

describe("README examples", () => {
  let demo: Demo;
  let dir: string;
  beforeAll(async () => {
    demo = await startDemo({ port: 0, quiet: true, timeScale: 0, workers: 2 });
    dir = await mkdtemp(join(tmpdir(), "radixgate-readme-"));
  });
  afterAll(async () => {
    await demo?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("the /debug/route curl line answers where the request would go, and why", async () => {
    const readme = await readFile(join(ROOT, "README.md"), "utf8");
    const lines = readme.split("\n");
    const first = lines.findIndex((l) => /^curl .*localhost:30000\/debug\/route/.test(l));
    expect(first, "a curl line for /debug/route in README.md").toBeGreaterThanOrEqual(0);
    let end = first;
    while (lines[end]?.endsWith("\\")) end += 1;
    const command = lines
      .slice(first, end + 1)
      .join("\n")
      .replace("localhost:30000", `localhost:${demo.port}`);
    const { stdout } = await promisify(execFile)("sh", ["-c", command], { cwd: dir });
    const answer = JSON.parse(stdout) as {
      dry_run: boolean;
      decision: { worker: string } | null;
      candidates: { worker: string }[];
    };
    expect(answer.dry_run).toBe(true);
    const ids = demo.router.context.registry.list().map((w) => w.id);
    expect(ids).toContain(answer.decision?.worker);
    expect(answer.candidates.map((c) => c.worker).sort()).toEqual([...ids].sort());
  });
});
