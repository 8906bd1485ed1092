/**
 * What the tenant-share rule costs per question at --max-tenants scale: TenantShares.heldForOthers
 * (asked for every waiting request the queue looks at, up to 64 a turn, and for every admitted
 * request) with the tenant table full of idle tenants, against a walk over every tenant on each
 * question (how it was first written). Two workers with a said cap; a flooding tenant over its
 * share, three light ones active.
 *
 *   npm run bench:tenant-share
 *   npm run bench:tenant-share -- --tenants 64,1000,10000 --questions 200000
 */
import { parseArgs } from "node:util";
import { ACTIVE_WINDOW_MS, TenantShares } from "../src/admission/tenant-share.js";
import type { SaturationView } from "../src/workers/saturation.js";
import { runIfEntryPoint } from "./lib/entry.js";
import { fmt } from "./lib/latency.js";
import { printTable } from "./lib/stats.js";

const worker = (id: string): SaturationView => ({
  id,
  ownInFlight: 7,
  pendingPrefillRequests: 0,
  pendingPrefillChars: 0,
  signals: { load: () => undefined, maxRunning: 8 },
});

/** The first rule: every tenant looked at on each question. */
function walkOthers(
  table: Map<string, { inFlight: number; waiting: number; lastSeen: number }>,
  tenant: string,
  now: number,
): number {
  let others = 0;
  for (const [name, use] of table) {
    if (name === tenant) continue;
    if (use.inFlight > 0 || use.waiting > 0 || now - use.lastSeen < ACTIVE_WINDOW_MS) others += 1;
  }
  return others;
}

function nsPer(questions: number, ask: (i: number) => unknown): number {
  let sink = 0;
  for (let i = 0; i < Math.min(questions, 10_000); i++) sink += Number(ask(i));
  const start = process.hrtime.bigint();
  for (let i = 0; i < questions; i++) sink += Number(ask(i));
  const ns = Number(process.hrtime.bigint() - start) / questions;
  if (sink === Number.MIN_VALUE) console.log(sink);
  return ns;
}

export async function main(argv = process.argv.slice(2)): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      tenants: { type: "string", default: "64,1000,10000" },
      questions: { type: "string", default: "200000" },
    },
  });
  const questions = Number(values.questions);
  const rows: string[][] = [];
  for (const n of String(values.tenants).split(",").map(Number)) {
    const workers = [worker("w0"), worker("w1")];
    const shares = new TenantShares(1);
    const table = new Map<string, { inFlight: number; waiting: number; lastSeen: number }>();
    // Idle tenants, seen long ago; then the flood and three light tenants, active now.
    for (let i = 0; i < n - 4; i++) {
      shares.seen(`idle-${i}`, 0);
      table.set(`idle-${i}`, { inFlight: 0, waiting: 0, lastSeen: 0 });
    }
    const now = 10 * ACTIVE_WINDOW_MS;
    for (let i = 0; i < 12; i++) shares.started("flood");
    table.set("flood", { inFlight: 12, waiting: 0, lastSeen: now });
    for (const t of ["B", "C", "D"]) {
      shares.seen(t, now, 0);
      table.set(t, { inFlight: 0, waiting: 0, lastSeen: now });
    }
    const counted = nsPer(questions, () => shares.heldForOthers("flood", workers, now));
    const walked = nsPer(questions, () => walkOthers(table, "flood", now) > 0);
    rows.push([String(n), fmt(counted, 0), fmt(walked, 0), fmt(walked / counted, 1)]);
  }
  console.log(`${questions} questions each (ns per question; a queue turn asks up to 64)`);
  printTable(["tenants", "heldForOthers ns", "walk over the table ns", "walk ÷ counted"], rows);
}

runIfEntryPoint(import.meta.url, main);
