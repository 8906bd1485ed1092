/**
 * The pair's forwarding against simulators that behave as the engines do: an SGLang decode
 * worker sends a stream's headers before the KV cache has come, so the router holds its answer
 * until the prefill side has answered; a decode's 500 before the first byte is retried on
 * another pair, as SGLang's gateway does (pd_router.rs). With --engine-priority, both engines
 * get the request's priority; /debug/route explains the pair.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { SimWorker } from "../../sim/worker.js";
import { postJson, waitFor } from "../helpers/router.js";
import { events, type PdFleet, pdChat, startPdFleet, usePdFleet } from "./pd-fleet.js";

const SYSTEM = "You route parcels through the night shift. ".repeat(20);

function chat(fleet: PdFleet, question: string, extra: Record<string, unknown> = {}) {
  return pdChat(fleet, { model: "m", system: SYSTEM, maxTokens: 4 }, question, extra);
}

describe("SGLang PD: the decode side's answer is held until the prefill side has answered", () => {
  const fleetOf = usePdFleet("sglang", { prefill: 2, decode: 2 });
  let fleet: PdFleet;
  beforeAll(() => {
    fleet = fleetOf();
  });

  it("the decode simulator sends a stream's headers before the hand-off, as SGLang does", async () => {
    const [p1, p2] = fleet.prefill as [SimWorker, SimWorker];
    for (const p of [p1, p2]) p.setFaults({ hang: true });
    try {
      const controller = new AbortController();
      const res = await fetch(`${fleet.decode[0]!.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "m",
          messages: [{ role: "user", content: "hi" }],
          stream: true,
          bootstrap_host: "127.0.0.1",
          bootstrap_port: p1.bootstrapPort,
          bootstrap_room: 7,
        }),
        signal: controller.signal,
      });
      // The headers came while room 7 has no prefill at all.
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/text\/event-stream/);
      controller.abort();
    } finally {
      for (const p of [p1, p2]) p.setFaults({ hang: false });
    }
  });

  it("a prefill worker that dies before it hands over: the pair is retried, the client sees a whole stream", async () => {
    const [p1] = fleet.prefill as [SimWorker, SimWorker];
    // p1 takes the request, sends its stream's headers and dies before its first token.
    p1.setFaults({ crashMidStream: 0 });
    for (let i = 0; p1.stats().crashed === 0 && i < 8; i++) {
      const res = await chat(fleet, `hand-off ${i}`, { stream: true });
      expect(res.status).toBe(200);
      const data = events(await res.text());
      expect(data.at(-1)).toBe("[DONE]");
      expect(data.some((d) => d.includes('"error"'))).toBe(false);
    }
    expect(p1.stats().crashed).toBe(1);
  });

  it("a decode that answers 500 before its first byte: the pair is retried on another decode worker", async () => {
    const [d1, d2] = fleet.decode as [SimWorker, SimWorker];
    d1.setFaults({ failFirst: 1, failStatus: 500 });
    // Whichever decode worker the load policy picks first, every answer is whole.
    for (let i = 0; d1.stats().failed === 0 && i < 6; i++) {
      const res = await chat(fleet, `a decode 500, ${i}`);
      expect(res.status).toBe(200);
      expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
    }
    expect(d1.stats().failed).toBe(1);
    expect(d2.stats().failed).toBe(0);
  });

  it("/debug/route explains the pair: the prefill side's choice and the decode side's", async () => {
    const res = await postJson(`${fleet.router.url}/debug/route/v1/chat/completions`, {
      model: "m",
      messages: [{ role: "user", content: "where would I go?" }],
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      decision: { worker: string };
      candidates: { worker: string }[];
      pair: { protocol: string; prefill: string; decode: string; decode_candidates: unknown[] };
    };
    const id = (w: SimWorker) => fleet.router.context.registry.get(w.url)!.id;
    expect(body.pair.protocol).toBe("sglang");
    expect(body.pair.prefill).toBe(body.decision.worker);
    expect(body.candidates.map((c) => c.worker).sort()).toEqual(fleet.prefill.map(id).sort());
    expect(fleet.decode.map(id)).toContain(body.pair.decode);
    expect(body.pair.decode_candidates).toHaveLength(2);
  });
});

describe("PD with --engine-priority: both engines get the priority, as without PD", () => {
  for (const flavor of ["sglang", "vllm"] as const) {
    it(`${flavor}: the prefill and the decode engine each receive it in their convention`, async () => {
      const fleet = await startPdFleet(
        flavor,
        { prefill: 1, decode: 1 },
        {
          enginePriority: true,
          enginePollIntervalSecs: 60,
        },
      );
      try {
        const workers = [...fleet.prefill, ...fleet.decode];
        const registered = workers.map((w) => fleet.router.context.registry.get(w.url)!);
        await waitFor(
          () => registered.every((w) => w.signals.engine === flavor),
          5000,
          "engine kinds read",
        );
        const res = await postJson(
          `${fleet.router.url}/v1/chat/completions`,
          {
            model: "meta-llama/Llama-3.1-8B-Instruct",
            messages: [{ role: "user", content: "hi" }],
            max_tokens: 2,
          },
          { "x-priority": "40" },
        );
        expect(res.status).toBe(200);
        await res.text();
        const expected = flavor === "vllm" ? -40 : 40;
        expect(workers.map((w) => w.stats().lastPriority)).toEqual([expected, expected]);
      } finally {
        await fleet.close();
      }
    });
  }
});
