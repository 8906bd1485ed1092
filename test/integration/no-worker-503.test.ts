/**
 * Issue 19 item 8: with no worker to offer, the data plane and GET /v1/models answered 503 with
 * two different messages ("No workers are registered; ..." and "No healthy worker is
 * available."). Both now say the same thing, for an empty fleet and for one that is all down.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { RunningRouter } from "../../src/server.js";
import { postJson, startTestRouter } from "../helpers/router.js";

async function errorOf(res: Response): Promise<{ status: number; code: string; message: string }> {
  const body = (await res.json()) as { error: { code: string; message: string } };
  return { status: res.status, code: body.error.code, message: body.error.message };
}

describe("issue 19: the two no-worker 503s say the same thing", () => {
  let router: RunningRouter | undefined;
  afterEach(async () => {
    await router?.stop(100);
    router = undefined;
  });

  async function both(r: RunningRouter) {
    const chat = await errorOf(
      await postJson(`${r.url}/v1/chat/completions`, {
        model: "m",
        messages: [{ role: "user", content: "hi" }],
      }),
    );
    const models = await errorOf(await fetch(`${r.url}/v1/models`));
    return { chat, models };
  }

  it("no worker registered", async () => {
    router = await startTestRouter();
    const { chat, models } = await both(router);
    expect(chat).toMatchObject({ status: 503, code: "no_workers_available" });
    expect(models).toEqual(chat);
    expect(chat.message).toContain("--worker-urls");
  });

  it("workers registered, none available", async () => {
    router = await startTestRouter();
    const worker = router.context.registry.add("http://127.0.0.1:9");
    worker.healthy = false;
    const { chat, models } = await both(router);
    expect(chat).toMatchObject({ status: 503, code: "no_workers_available" });
    expect(models).toEqual(chat);
    expect(chat.message).toContain("None of the 1 registered workers is available");
  });
});
