import { beforeAll, describe, expect, it } from "vitest";
import type { SimWorker } from "../../sim/worker.js";
import { postJson } from "../helpers/router.js";
import { events, type PdFleet, pdChat, totalRequests, usePdFleet } from "./pd-fleet.js";

const MODEL = "meta-llama/Llama-3.1-8B-Instruct";
const SYSTEM = "You answer questions about the library catalogue. ".repeat(20);

function chat(fleet: PdFleet, question: string, extra: Record<string, unknown> = {}) {
  return pdChat(fleet, { model: MODEL, system: SYSTEM, maxTokens: 5 }, question, extra);
}

describe("vLLM P/D (issue 25): prefill for one token and the transfer params, then decode", () => {
  const fleetOf = usePdFleet("vllm", { prefill: 2, decode: 2 });
  let fleet: PdFleet;
  beforeAll(() => {
    fleet = fleetOf();
  });

  it("the prefill worker computes one token, the decode worker answers with the params it gave", async () => {
    const prefillTokens = fleet.prefill.reduce((n, p) => n + p.stats().completionTokens, 0);
    const res = await chat(fleet, "Is the atlas on loan?");
    expect(res.status).toBe(200);
    const body = (await res.json()) as { usage: { completion_tokens: number } };
    expect(body.usage.completion_tokens).toBe(5);
    expect(["d1", "d2"]).toContain(res.headers.get("x-sim-worker-id"));
    // max_tokens 1 on the prefill side.
    expect(fleet.prefill.reduce((n, p) => n + p.stats().completionTokens, 0)).toBe(
      prefillTokens + 1,
    );
  });

  it("streams the decode answer (the prefill side is asked without streaming)", async () => {
    const res = await chat(fleet, "Stream the answer", {
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    const data = events(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    expect(data.some((d) => d.includes('"usage"'))).toBe(true);
  });

  it("keeps one prompt prefix on one prefill worker", async () => {
    const before = fleet.prefill.map((p) => p.stats().requests);
    for (let i = 0; i < 4; i++) expect((await chat(fleet, `Book ${i}?`)).status).toBe(200);
    expect(fleet.prefill.map((p, i) => p.stats().requests - before[i]!).sort()).toEqual([0, 4]);
  });

  it("the simulators refuse requests without the transfer params, saying why", async () => {
    const plain = { model: MODEL, messages: [{ role: "user", content: "hi" }] };
    const decode = await postJson(`${fleet.decode[0]!.url}/v1/chat/completions`, plain);
    expect(decode.status).toBe(400);
    expect(JSON.stringify(await decode.json())).toMatch(/kv_transfer_params/);
    const prefill = await postJson(`${fleet.prefill[0]!.url}/v1/chat/completions`, plain);
    expect(prefill.status).toBe(400);
    expect(JSON.stringify(await prefill.json())).toMatch(/do_remote_decode/);
  });

  it("a prefill failure before the first byte retries the pair on another prefill worker", async () => {
    const counts = fleet.prefill.map((p) => p.stats().requests);
    expect((await chat(fleet, "probe")).status).toBe(200);
    const chosen = fleet.prefill.findIndex((p, i) => p.stats().requests > counts[i]!);
    fleet.prefill[chosen]!.setFaults({ failFirst: 1, failStatus: 503 });
    const before = fleet.prefill.map((p) => p.stats().requests);
    const decodeBefore = totalRequests(fleet.decode);
    const res = await chat(fleet, "probe again");
    expect(res.status).toBe(200);
    expect(fleet.prefill.map((p, i) => p.stats().requests - before[i]!)).toEqual([1, 1]);
    // The decode side was asked once: after the prefill that succeeded.
    expect(totalRequests(fleet.decode)).toBe(decodeBefore + 1);
  });

  it("a decode failure before the first byte retries the pair", async () => {
    const [d1, d2] = fleet.decode as [SimWorker, SimWorker];
    d1.setFaults({ failFirst: 1, failStatus: 503 });
    for (let i = 0; d1.stats().failed === 0 && i < 6; i++) {
      const res = await chat(fleet, `decode retry ${i}`, { stream: true });
      expect(res.status).toBe(200);
      expect(events(await res.text()).at(-1)).toBe("[DONE]");
    }
    expect(d1.stats().failed).toBe(1);
    expect(d2.stats().failed).toBe(0);
  });

  it("a decode failure after the first byte is never retried", async () => {
    const prefillBefore = totalRequests(fleet.prefill);
    const decodeBefore = totalRequests(fleet.decode);
    for (const d of fleet.decode) d.setFaults({ crashMidStream: 2 });
    const res = await chat(fleet, "cut", { stream: true, max_tokens: 8 });
    expect(res.status).toBe(200);
    expect(await res.text().catch(() => "")).not.toMatch(/\[DONE\]/);
    expect(totalRequests(fleet.prefill)).toBe(prefillBefore + 1);
    expect(totalRequests(fleet.decode)).toBe(decodeBefore + 1);
  });
});
