import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { healthUrl, routerProcessArgs } from "../src/healthcheck-target.js";
import { startTestRouter } from "./helpers/router.js";

const run = promisify(execFile);
const ROOT = new URL("../", import.meta.url).pathname;

describe("container health check", () => {
  it("probes the port given as a flag, not only RADIXGATE_PORT (issue 13 item 10)", () => {
    expect(healthUrl(["--port", "8080"])).toBe("http://127.0.0.1:8080/health");
    expect(healthUrl(["--host", "10.1.2.3", "--port", "9000"])).toBe("http://10.1.2.3:9000/health");
    expect(healthUrl(["--host", "::1", "--port", "9000"])).toBe("http://[::1]:9000/health");
  });

  it("reads the router's flags from PID 1's command line (exec-form ENTRYPOINT)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "radixgate-hc-"));
    try {
      const cmdline = join(dir, "cmdline");
      await writeFile(cmdline, ["node", "dist/cli.js", "--port", "8123", ""].join("\0"));
      expect(routerProcessArgs(cmdline)).toEqual(["--port", "8123"]);
      await writeFile(cmdline, ["/sbin/init", ""].join("\0"));
      expect(routerProcessArgs(cmdline)).toEqual([]);
      expect(routerProcessArgs(join(dir, "missing"))).toEqual([]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("exits 0 against a running router and 1 when nothing listens", async () => {
    const router = await startTestRouter();
    const check = (port: number) =>
      run(
        process.execPath,
        ["--import", "tsx", "src/healthcheck.ts", "--host", "127.0.0.1", "--port", String(port)],
        { cwd: ROOT },
      ).then(
        () => 0,
        (err: { code?: number }) => err.code ?? -1,
      );
    try {
      expect(await check(router.port)).toBe(0);
    } finally {
      await router.stop(100);
    }
    expect(await check(router.port)).toBe(1);
  });
});
