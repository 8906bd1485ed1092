import { afterEach, describe, expect, it } from "vitest";
import { type CacheTotals, filler } from "../helpers/cache-account.js";
import { postJson, waitFor } from "../helpers/router.js";
import { type PdFleet, startPdFleet } from "./pd-fleet.js";

type Totals = CacheTotals;

const ADMIN = { authorization: "Bearer admin-key" };

async function accountAfter(
  fleet: PdFleet,
  n: number,
): Promise<Totals & { workers: Record<string, Totals> }> {
  const read = async () => {
    const res = await fetch(`${fleet.router.url}/debug/cache`, { headers: ADMIN });
    expect(res.status).toBe(200);
    return (await res.json()) as Totals & { workers: Record<string, Totals> };
  };
  await waitFor(async () => (await read()).requests >= n, 5000, `${n} accounted`);
  return read();
}

describe("PD requests feed the cache account (issue 26 over issue 25's pair forwarder)", () => {
  let fleet: PdFleet | undefined;
  afterEach(async () => {
    await fleet?.close();
    fleet = undefined;
  });

  for (const flavor of ["sglang", "vllm"] as const) {
    it(`${flavor}: the prefill side's choice is the accounted one, its cached count the reported one`, async () => {
      fleet = await startPdFleet(
        flavor,
        { prefill: 2, decode: 1 },
        { adminApiKey: "admin-key", explainHeader: "x-cache-account" },
      );
      const prompt = filler(`pd-${flavor}`, 2000);
      const send = async () => {
        const res = await postJson(`${fleet!.router.url}/v1/completions`, {
          prompt,
          max_tokens: 2,
        });
        expect(res.status).toBe(200);
        await res.arrayBuffer();
        return res;
      };
      const first = await send();
      const cold = await accountAfter(fleet, 1);
      expect(cold.prompt_tokens).toBeGreaterThan(400);
      expect(cold.available_tokens).toBe(0);
      expect(cold.cold_tokens).toBe(cold.prompt_tokens);
      expect(first.headers.get("x-cache-account")).toMatch(/^available=0;chosen=0/);

      const second = await send();
      const a = await accountAfter(fleet, 2);
      // The repeat went to the prefill worker that holds it, and that worker said so.
      const held = a.prompt_tokens - cold.prompt_tokens;
      expect(a.available_tokens).toBeGreaterThan(held / 2);
      expect(a.chosen_tokens).toBe(a.available_tokens);
      expect(a.reported_cached_tokens).toBeGreaterThan(held / 2);
      expect(a.routing_loss_tokens.total).toBe(0);
      expect(a.unreported_tokens).toBe(0);
      expect(
        a.reported_cached_tokens +
          a.index_loss_tokens +
          a.unreported_tokens +
          a.routing_loss_tokens.total +
          a.cold_tokens,
      ).toBe(a.prompt_tokens);
      // Per worker: the prefill workers, never the decode one.
      const prefillIds = fleet.router.context.registry
        .list()
        .filter((w) => w.role.type === "prefill")
        .map((w) => w.id);
      expect(Object.keys(a.workers).length).toBeGreaterThan(0);
      for (const id of Object.keys(a.workers)) expect(prefillIds).toContain(id);
      expect(second.headers.get("x-cache-account")).toMatch(/^available=[1-9]\d*;chosen=[1-9]/);
    });
  }
});
