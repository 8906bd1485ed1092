/**
 * The cache account's own cost per request (issue 26), without sockets: open an account, record a
 * decision, settle it against an engine's usage and add it to the ledger (the counters' totals,
 * the minute window, the top-prefix tables), in a loop. Half the requests lose tokens to routing
 * (their prefix hashed into the table), as in a fleet where the policy often trades cache for load.
 *
 *   npx tsx bench/cache-account.ts [--requests 2000000] [--no-loss]   (--no-loss: no request loses)
 */
import { parseArgs } from "node:util";
import { CacheLedger } from "../src/cache-account/cache-ledger.js";
import { createLogger } from "../src/logger.js";
import { runIfEntryPoint } from "./lib/entry.js";

async function main(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: { requests: { type: "string" }, "no-loss": { type: "boolean", default: false } },
  });
  const LOSE = values["no-loss"] !== true;
  const n = Number(values.requests ?? 2_000_000);
  const ledger = new CacheLedger(
    { enabled: true, explainHeader: undefined, windowMins: 15, topPrefixes: 10 },
    createLogger({ level: "info" }),
  );
  const texts = Array.from({ length: 64 }, (_, i) => `#${i} ${"system prompt ".repeat(80)}`);
  const workers = [{ id: "w1" }, { id: "w2" }, { id: "w3" }, { id: "w4" }];
  const run = (count: number) => {
    for (let i = 0; i < count; i++) {
      const text = texts[i & 63]!;
      const account = ledger.open(text, "m");
      const lost = LOSE && (i & 1) === 1;
      account.decided({
        worker: workers[i & 3]!,
        branch: "lowest_cost",
        matchRate: 0.5,
        index: "shared",
        heldBefore: lost ? 0 : 800,
        available: 800,
        runnerUp: workers[(i + 1) & 3],
        runnerUpHeld: 800,
        lossReason: lost ? "load" : null,
      });
      account.settle(280, lost ? 0 : 196, 4);
      ledger.record(account, "id");
    }
  };
  run(200_000); // JIT warm-up
  // CPU time, not wall time: the machine is shared, and a wall clock counts the other processes.
  const start = process.cpuUsage();
  run(n);
  const used = process.cpuUsage(start);
  const ns = ((used.user + used.system) * 1000) / n;
  console.log(
    `cache account: ${ns.toFixed(0)} ns of CPU per request over ${n} requests (${LOSE ? "half" : "none"} losing)`,
  );
}

runIfEntryPoint(import.meta.url, () => main(process.argv.slice(2)));
