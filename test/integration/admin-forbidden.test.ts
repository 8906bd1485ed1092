/**
 * Issue 19 item 7: behind Docker's port mapping the admin API sees the bridge's address, not
 * loopback, and answers 403; the message names the flag (and the variable) that opens it.
 *
 * Tests listen on 127.0.0.1 only, so no real socket here can come from a non-loopback address: the
 * guard is run in a hono app whose node binding reports the bridge's address (172.17.0.1) as the
 * peer, which is the one field of the socket the guard reads. The loopback path goes through a
 * real router.
 */
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { RouterError } from "../../src/errors.js";
import { adminGuard } from "../../src/routes/admin.js";
import { bearerKey } from "../../src/routes/auth.js";
import type { RouterContext } from "../../src/routes/context.js";
import type { RunningRouter } from "../../src/server.js";
import { startTestRouter } from "../helpers/router.js";

const BRIDGE = "172.17.0.1";

/** The guard in front of one route, with the peer address the node binding would report. */
async function getFromBridge(
  adminApiKey: string | undefined,
  headers: Record<string, string> = {},
) {
  const ctx = { config: { adminApiKey: bearerKey(adminApiKey) } } as unknown as RouterContext;
  // biome-ignore lint/suspicious/noExplicitAny: the node binding's env, reduced to what the guard reads
  const app = new Hono<any>();
  app.use(adminGuard(ctx));
  app.get("/workers", (c) => c.json({ workers: [] }));
  app.onError((err, c) =>
    err instanceof RouterError ? c.json(err.toBody(), err.status as 400) : c.text("bug", 500),
  );
  const env = { incoming: { socket: { remoteAddress: BRIDGE } } };
  const res = await app.request("/workers", { headers }, env);
  return { status: res.status, body: await res.text() };
}

describe("admin API from a non-loopback address", () => {
  let router: RunningRouter | undefined;
  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
  });

  it("answers 403 naming --admin-api-key, RADIXGATE_ADMIN_API_KEY and the address it saw", async () => {
    const res = await getFromBridge(undefined);
    expect(res.status).toBe(403);
    const { error } = JSON.parse(res.body) as { error: { code: string; message: string } };
    expect(error.code).toBe("forbidden");
    expect(error.message).toContain("--admin-api-key");
    expect(error.message).toContain("RADIXGATE_ADMIN_API_KEY");
    expect(error.message).toContain(BRIDGE);
    expect(error.message).toContain("docs/deployment.md");
  });

  it("with --admin-api-key the same client gets in with the key", async () => {
    expect((await getFromBridge("k-123")).status).toBe(401);
    expect((await getFromBridge("k-123", { authorization: "Bearer k-123" })).status).toBe(200);
  });

  it("a loopback client of a real router gets in without a key", async () => {
    router = await startTestRouter({});
    const res = await fetch(`http://127.0.0.1:${router.port}/workers`);
    expect(res.status).toBe(200);
  });
});
