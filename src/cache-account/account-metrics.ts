import { Counter, type Registry } from "prom-client";
import { LOSS_REASONS } from "../scheduling/loss-reason.js";
import type { AccountTotals } from "./account-totals.js";

/**
 * The cache account's Prometheus counters (docs/hit-rate.md), read from the ledger's running
 * totals at scrape time, so a request only adds numbers and never touches prom-client. Tokens of
 * requests that used a prefix index; the parts (cold, routing loss by reason, index loss,
 * unreported, reported cached) add up to the prompt tokens.
 */
export function registerAccountMetrics(registry: Registry, totals: AccountTotals): void {
  const registers = [registry];
  const counter = (name: string, help: string, read: () => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  counter(
    "radixgate_cache_account_requests_total",
    "Requests that used a prefix index and were answered: the ones the cache account counts.",
    () => totals.requests,
  );
  counter(
    "radixgate_cache_account_prompt_tokens_total",
    "Prompt tokens of the accounted requests (the engine's count, else characters over the learned characters per token).",
    () => totals.prompt,
  );
  counter(
    "radixgate_cache_account_available_tokens_total",
    "Prompt tokens the best-holding healthy worker held, by the prefix index's account.",
    () => totals.available,
  );
  counter(
    "radixgate_cache_account_chosen_tokens_total",
    "Prompt tokens the chosen worker held, by the prefix index's account.",
    () => totals.chosen,
  );
  counter(
    "radixgate_cache_account_reported_cached_tokens_total",
    "Prompt tokens the engines reported as cached (cached_tokens) for the accounted requests.",
    () => totals.reported,
  );
  counter(
    "radixgate_cache_account_cold_tokens_total",
    "Prompt tokens no worker held: prompt minus the larger of available and reported.",
    () => totals.cold,
  );
  counter(
    "radixgate_cache_account_index_loss_tokens_total",
    "Prompt tokens the index credited to the chosen worker and its engine did not report as cached (evicted, or still being computed).",
    () => totals.indexLoss,
  );
  counter(
    "radixgate_cache_account_unreported_tokens_total",
    "Prompt tokens the index credited to the chosen worker whose engine reported no cached count to check them against.",
    () => totals.unreported,
  );
  new Counter({
    name: "radixgate_cache_account_routing_loss_tokens_total",
    help: "Prompt tokens another worker held beyond the chosen one, by why it was not chosen (load, session, filter, unknown).",
    labelNames: ["reason"],
    registers,
    collect() {
      this.reset();
      for (const reason of LOSS_REASONS) this.inc({ reason }, totals.routingLoss[reason]);
    },
  });
}
