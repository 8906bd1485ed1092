import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { nginxConfig } from "../../src/nginx/config.js";
import { NJS_SCRIPT } from "../../src/nginx/script.js";
import { njsModulePath, resolveNginxBinary } from "../../src/nginx/supervisor.js";
import { nginxWithNjs } from "../helpers/nginx.js";

const options = (dir: string) => ({
  dir,
  host: "127.0.0.1",
  port: 1,
  socket: join(dir, "radixgate.sock"),
  logPort: 2,
  paths: ["/v1/chat/completions", "/generate"],
  upstreams: [{ name: "rg_w0", address: "127.0.0.1:8000" }],
  njsModule: undefined,
  connectTimeoutMs: 1500,
  readTimeoutMs: 120_000,
  maxBodyBytes: 1 << 20,
  waitHeader: "x-queue-wait-ms",
  explainHeader: undefined,
  workerProcesses: 0,
});

describe("nginxConfig", () => {
  it("routes each inference path to the decision endpoint and retries nginx's own 502/504", () => {
    const conf = nginxConfig(options("/tmp/x"));
    expect(conf).toContain("location = /generate {");
    // The inference request itself is the decision call: no script on that path.
    expect(conf).toMatch(
      /location = \/generate \{[^}]*\}\s*proxy_pass http:\/\/radixgate;[^}]*X-Radixgate-Call decide;/i,
    );
    expect(conf).toContain("error_page 502 504 = @retry;");
    expect(conf).toContain("proxy_buffering off;");
    expect(conf).toContain("add_header x-queue-wait-ms $rg_wait always;");
    expect(conf).toContain("upstream rg_w0 {");
    expect(conf).toContain("proxy_connect_timeout 1500ms;");
    // Decision calls and relays reuse their connections (no close after nginx's default 1000).
    expect(conf).toMatch(
      /upstream radixgate \{[^}]*keepalive 1024;[^}]*keepalive_requests 1000000;/,
    );
    expect(conf).toMatch(/upstream rg_w0 \{[^}]*keepalive_requests 1000000;/);
  });

  it("refuses a header name nginx.conf could not hold", () => {
    expect(() => nginxConfig({ ...options("/tmp/x"), waitHeader: "x; evil" })).toThrow();
  });

  it.skipIf(!nginxWithNjs())("is a configuration nginx accepts (nginx -t)", () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-nginx-test-"));
    try {
      writeFileSync(join(dir, "radixgate.js"), NJS_SCRIPT);
      const conf = join(dir, "nginx.conf");
      writeFileSync(conf, nginxConfig({ ...options(dir), njsModule: njsModulePath("nginx") }));
      const run = spawnSync(resolveNginxBinary("nginx"), ["-t", "-p", dir, "-c", conf], {
        encoding: "utf8",
      });
      expect(run.stderr).toContain("syntax is ok");
      expect(run.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
