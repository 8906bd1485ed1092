import { mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runCli, SERVE_LOCALLY } from "../helpers/cli.js";
import { listWorkers } from "../helpers/discovery.js";
import { killChild } from "../helpers/kill-child.js";
import { waitFor } from "../helpers/router.js";

// The real CLI in a process of its own: a parser that kills its process must show as a dead child.
describe("--worker-file: a hostile version cannot stop the router", () => {
  let dir: string;
  let file: string;
  let cli: ReturnType<typeof runCli>;
  let url: string;
  let output = "";

  const rewrite = async (text: string) => {
    await writeFile(`${file}.tmp`, text);
    await rename(`${file}.tmp`, file);
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "radixgate-hostile-file-"));
    file = join(dir, "workers.yaml");
    await writeFile(file, "- http://10.0.0.1:30000\n");
    cli = runCli([...SERVE_LOCALLY, "--worker-file", file]);
    cli.child.stdout!.on("data", (d) => (output += d));
    // The listening line's URL (the worker file's URLs are logged before it).
    // Generous: a loaded machine starts the CLI (through tsx) slowly.
    await waitFor(() => output.includes('"msg":"radixgate listening"'), 100_000, "listening");
    const line = output.split("\n").find((l) => l.includes('"msg":"radixgate listening"'));
    url = (JSON.parse(line as string) as { url: string }).url;
  }, 120_000);
  afterAll(async () => {
    await killChild(cli?.child);
    await rm(dir, { recursive: true, force: true });
  });

  it("100k nested brackets (200 KB) are refused and logged; the router serves and takes the next good version", async () => {
    await rewrite("[".repeat(100_000));
    await waitFor(() => output.includes("worker file ignored"), 60_000);
    await rewrite("- http://10.0.0.1:30000\n- http://10.0.0.2:30000\n");
    await waitFor(
      async () => cli.child.exitCode !== null || (await listWorkers(url)).length === 2,
      60_000,
    );
    expect(cli.child.exitCode).toBeNull();
    expect((await listWorkers(url)).map((w) => w.url).sort()).toEqual([
      "http://10.0.0.1:30000",
      "http://10.0.0.2:30000",
    ]);
    expect((await fetch(`${url}/health`)).status).toBeLessThan(600);
    expect(output).toMatch(/"reason":"line 1: nested deeper than 32 levels"/);
  }, 150_000);
});
