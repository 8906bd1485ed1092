/**
 * Issue 19 item 7: behind Docker's port mapping the admin API sees the bridge's address, not
 * loopback, and answers 403; the message names the flag (and the variable) that opens it. A
 * request from this machine's own non-loopback address stands in for the bridge.
 */
import { request } from "node:http";
import { networkInterfaces } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

/** An IPv4 address of this machine that is not loopback (a container's eth0), if any. */
const outside = Object.values(networkInterfaces())
  .flat()
  .find((i) => i !== undefined && i.family === "IPv4" && !i.internal)?.address;

function getFrom(address: string, port: number, path: string, headers = {}) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = request({ host: address, localAddress: address, port, path, headers }, (res) => {
      let body = "";
      res.on("data", (d) => (body += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on("error", reject);
    req.end();
  });
}

describe.skipIf(outside === undefined)("admin API from a non-loopback address", () => {
  let router: RunningRouter | undefined;
  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
  });

  it("answers 403 naming --admin-api-key, RADIXGATE_ADMIN_API_KEY and the address it saw", async () => {
    router = await startTestRouter({ host: "0.0.0.0" });
    const res = await getFrom(outside as string, router.port, "/workers");
    expect(res.status).toBe(403);
    const { error } = JSON.parse(res.body) as { error: { code: string; message: string } };
    expect(error.code).toBe("forbidden");
    expect(error.message).toContain("--admin-api-key");
    expect(error.message).toContain("RADIXGATE_ADMIN_API_KEY");
    expect(error.message).toContain(outside);
    expect(error.message).toContain("docs/deployment.md");
  });

  it("with --admin-api-key the same client gets in with the key", async () => {
    router = await startTestRouter({ host: "0.0.0.0", adminApiKey: "k-123" });
    expect((await getFrom(outside as string, router.port, "/workers")).status).toBe(401);
    const ok = await getFrom(outside as string, router.port, "/workers", {
      authorization: "Bearer k-123",
    });
    expect(ok.status).toBe(200);
  });
});
