import { createServer } from "node:net";
import { describe, expect, it } from "vitest";
import { listeningUrl, runCli, SERVE_LOCALLY, stderrLines } from "../helpers/cli.js";

describe("CLI", () => {
  it.each([
    [["--cache-threshold", "2"], "--cache-threshold"],
    [["--balance-rel-threshold", "0.5"], "--balance-rel-threshold"],
    [["--policy", "fastest"], "--policy"],
    [["--worker-urls", "http//broken"], "--worker-urls"],
  ])("exits 2 with one line naming the flag for %j", async (args, flag) => {
    const { code, stderr } = await runCli(args).done;
    expect(code).toBe(2);
    const lines = stderrLines(stderr);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(flag);
  });

  it.each([
    [["--polcy", "random"], "unknown option '--polcy' (did you mean --policy?)"],
    [
      ["--retry-max-retires", "3"],
      "unknown option '--retry-max-retires' (did you mean --retry-max-retries?)",
    ],
    [["--zzz"], "unknown option '--zzz';"],
    [["--policy"], "option '--policy <name>' argument missing"],
  ])(
    "issue 19: a command-line error %j is one line prefixed 'radixgate: error:' (with 'did you mean')",
    async (args, expected) => {
      const { code, stderr } = await runCli(args).done;
      expect(code).toBe(2);
      const lines = stderrLines(stderr);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^radixgate: error: /);
      expect(lines[0]).toContain(expected);
    },
  );

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
    expect(stdout).toContain('(default: "prefix_cost"');
    expect(stdout).toContain("RADIXGATE_CACHE_THRESHOLD");
  });

  it("starts with no workers, answers 503 on the data plane, and exits 0 on SIGTERM", async () => {
    const { child, done } = runCli(SERVE_LOCALLY);
    const url = await listeningUrl(child);
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

  it("runs the SGLang router docs' launch lines unchanged: mapped flags apply, ignored ones warn once each", async () => {
    // From sgl-project/sglang docs/advanced_features/router.md (Retries, Circuit Breaker, Rate
    // Limiting and Queuing), joined into one line; only the worker hosts are made local.
    const launch = `python -m sglang_router.launch_router \\
      --worker-urls http://worker1:8000 http://worker2:8001 \\
      --retry-max-retries 5 --retry-initial-backoff-ms 50 --retry-max-backoff-ms 30000 \\
      --retry-backoff-multiplier 1.5 --retry-jitter-factor 0.2 \\
      --cb-failure-threshold 5 --cb-success-threshold 2 --cb-timeout-duration-secs 30 \\
      --cb-window-duration-secs 60 \\
      --max-concurrent-requests 256 --rate-limit-tokens-per-second 512 --queue-size 128 \\
      --queue-timeout-secs 30`;
    const args = launch
      .replace(/\\\n/g, " ")
      .split(/\s+/)
      .filter((t) => t !== "")
      .slice(3)
      .map((t) => t.replace(/^http:\/\/worker(\d):(\d+)$/, "http://127.0.0.1:$2"));
    const { child, done } = runCli([...args, ...SERVE_LOCALLY]);
    await listeningUrl(child);
    child.kill("SIGTERM");
    const { code, stdout } = await done;
    expect(code).toBe(0);
    for (const flag of [
      "--retry-backoff-multiplier",
      "--retry-jitter-factor",
      "--cb-window-duration-secs",
      "--rate-limit-tokens-per-second",
    ]) {
      expect(stdout.split("\n").filter((l) => l.includes(`"msg":"${flag} `))).toHaveLength(1);
    }
  });
});
