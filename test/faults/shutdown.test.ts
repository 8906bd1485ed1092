import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { listeningUrl, runCli, SERVE_LOCALLY } from "../helpers/cli.js";
import { waitFor } from "../helpers/router.js";
import { chat, sseData } from "./support.js";

/** A request on a new connection (no keep-alive reuse): status, or the socket error's code. */
function freshRequest(url: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(
      `${url}/v1/completions`,
      { method: "POST", agent: false, headers: { "content-type": "application/json" } },
      (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      },
    );
    req.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.end('{"prompt":"too late","max_tokens":1}');
  });
}

describe("graceful shutdown", () => {
  let sim: SimWorker | undefined;
  afterEach(async () => {
    await sim?.close();
    sim = undefined;
  });

  it("SIGTERM under load: in-flight streams complete, new requests are refused, the process exits 0", async () => {
    // 40 tokens at 50 ms a step: each stream lasts about two seconds, long enough on a loaded
    // machine for all six to be running when SIGTERM arrives.
    // It serves "m", the model chat() asks for: the router reads its /v1/models and routes by model.
    sim = await startSimWorker({ id: "drain", model: "m", timeScale: 1, stepFloorMs: 50 });
    const { child, done } = runCli([
      ...SERVE_LOCALLY,
      "--worker-urls",
      sim.url,
      "--shutdown-grace-secs",
      "20",
    ]);
    let output = "";
    child.stdout!.on("data", (d) => (output += d));
    try {
      const url = await listeningUrl(child, 15_000);

      const streams = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          chat(url, `long story ${i}`, { stream: true, max_tokens: 40 }),
        ),
      );
      expect(streams.map((r) => r.status)).toEqual(Array(6).fill(200));
      await waitFor(() => sim!.stats().running === 6, 3000, "six streams running");

      child.kill("SIGTERM");
      await waitFor(() => output.includes("shutting down"), 5000, "shutdown to begin");
      const refused = await freshRequest(url);
      expect(["ECONNREFUSED", 503]).toContain(refused);

      const endings = await Promise.all(streams.map(async (r) => sseData(await r.text()).at(-1)));
      expect(endings).toEqual(Array(6).fill("[DONE]"));
      expect(sim.stats().completed).toBe(6);
      expect(sim.stats().aborted).toBe(0);

      const { code } = await done;
      expect(code).toBe(0);
      expect(output).toContain('"msg":"stopped"');
    } finally {
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });
});
