import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { runCli } from "../helpers/cli.js";

describe("CLI", () => {
  it.each([
    [["--cache-threshold", "2"], "--cache-threshold"],
    [["--balance-rel-threshold", "0.5"], "--balance-rel-threshold"],
    [["--policy", "fastest"], "--policy"],
    [["--worker-urls", "http//broken"], "--worker-urls"],
  ])("exits 2 with one line naming the flag for %j", async (args, flag) => {
    const { code, stderr } = await runCli(args).done;
    expect(code).toBe(2);
    const lines = stderr
      .trim()
      .split("\n")
      .filter((l) => !l.includes("npm warn"));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(flag);
  });

  it("exits 2 naming --port when the port is in use", async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    try {
      const { code, stderr } = await runCli(["--host", "127.0.0.1", "--port", String(port)]).done;
      expect(code).toBe(2);
      expect(stderr).toMatch(/--port .*already in use/);
    } finally {
      blocker.close();
    }
  });

  it("reads a bad value from RADIXGATE_* and names the flag", async () => {
    const { code, stderr } = await runCli([], { RADIXGATE_CACHE_THRESHOLD: "7" }).done;
    expect(code).toBe(2);
    expect(stderr).toContain("--cache-threshold");
  });

  it("--help lists every flag with its default", async () => {
    const { code, stdout } = await runCli(["--help"]).done;
    expect(code).toBe(0);
    expect(stdout).toContain("--worker-urls");
    expect(stdout).toContain('(default: "cache_aware"');
    expect(stdout).toContain("RADIXGATE_CACHE_THRESHOLD");
  });

  it("starts with no workers, answers 503 on the data plane, and exits 0 on SIGTERM", async () => {
    const { child, done } = runCli([
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--health-check-interval-secs",
      "0",
    ]);
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    const deadline = Date.now() + 10_000;
    let url: string | undefined;
    while (!url && Date.now() < deadline) {
      url = /"url":"(http:\/\/[^"]+)"/.exec(output)?.[1];
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(url).toBeDefined();
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [] }),
    });
    expect(res.status).toBe(503);
    child.kill("SIGTERM");
    const { code, stdout } = await done;
    expect(code).toBe(0);
    expect(stdout).toContain("shutting down");
  });
});
