import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

const CAP = 4;

// Regression: the connection pool to a worker had no cap; 10k streams left 8,387 idle
// connections open to one worker.
describe("connections to one worker are capped (--worker-max-connections)", () => {
  let worker: Server;
  let router: RunningRouter;
  let connections = 0;
  let peak = 0;
  let open = 0;

  beforeAll(async () => {
    // A worker that answers each completion after a short while, and counts its connections.
    worker = createServer((req, res) => {
      req.resume();
      req.on("end", () => {
        setTimeout(() => {
          res.writeHead(200, { "content-type": "application/json" });
          res.end(JSON.stringify({ object: "text_completion", choices: [{ text: "ok" }] }));
        }, 50);
      });
    });
    worker.on("connection", (socket) => {
      connections += 1;
      open += 1;
      peak = Math.max(peak, open);
      socket.on("close", () => {
        open -= 1;
      });
    });
    await new Promise<void>((resolve) => worker.listen(0, "127.0.0.1", resolve));
    const { port } = worker.address() as AddressInfo;
    router = await startTestRouter({
      workerUrls: [`http://127.0.0.1:${port}`],
      workerMaxConnections: CAP,
    });
  });
  afterAll(async () => {
    await router.stop(100);
    worker.closeAllConnections();
    await new Promise<void>((resolve) => worker.close(() => resolve()));
  });

  it("32 requests at once all succeed over at most the capped number of connections", async () => {
    const answers = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        postJson(`${router.url}/v1/completions`, { prompt: `request ${i}`, max_tokens: 1 }),
      ),
    );
    for (const res of answers) {
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
    expect(peak).toBeLessThanOrEqual(CAP);
    expect(connections).toBeLessThanOrEqual(CAP);
  });
});
