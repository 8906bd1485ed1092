import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { describe, expect, it } from "vitest";
import { Cancel } from "../../src/proxy/cancel.js";

describe("Cancel", () => {
  it("aborts once: the first reason stays, listeners hear it once", () => {
    const cancel = new Cancel();
    let heard = 0;
    cancel.on("abort", () => {
      heard += 1;
    });
    cancel.abort("first");
    cancel.abort("second");
    expect(cancel.aborted).toBe(true);
    expect(cancel.reason).toBe("first");
    expect(heard).toBe(1);
  });

  it("a listener removed before the abort is not called", () => {
    const cancel = new Cancel();
    let heard = 0;
    const listener = () => {
      heard += 1;
    };
    cancel.once("abort", listener);
    cancel.off("abort", listener);
    cancel.abort();
    expect(heard).toBe(0);
  });

  it("is a signal undici honours: an aborted request fails with the Cancel's reason", async () => {
    // A worker that never answers: only the abort can end the request.
    const server = createServer(() => {});
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const pool = new Pool(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    try {
      const cancel = new Cancel();
      const request = pool.request({ method: "GET", path: "/", signal: cancel });
      const reason = new Error("client gone");
      setTimeout(() => cancel.abort(reason), 20);
      await expect(request).rejects.toBe(reason);
      expect(cancel.listenerCount("abort")).toBe(0);
    } finally {
      await pool.destroy();
      server.closeAllConnections();
      server.close();
    }
  });
});
