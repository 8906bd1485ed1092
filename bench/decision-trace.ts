/**
 * npm run trace:explain -- A.jsonl [B.jsonl] [--limit N]: reads --decision-trace files
 * (bench/lib/decision-trace-explain.ts). A run whose replicas each wrote a file is given as their
 * comma-separated list (A-r0.jsonl,A-r1.jsonl), merged in clock order. One file: its summary and the decisions that left the
 * best holder, the most characters first. Two files (two runs of the same workload): both
 * summaries and the decisions on the same text that went to different workers.
 */
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { explainTraces, mergeTraces, parseTrace } from "./lib/decision-trace-explain.js";
import { runIfEntryPoint } from "./lib/entry.js";

async function main(): Promise<void> {
  const { values, positionals } = parseArgs({
    options: { limit: { type: "string", default: "10" } },
    allowPositionals: true,
  });
  const limit = Number(values.limit);
  if (positionals.length < 1 || positionals.length > 2 || !(limit >= 0)) {
    console.error(
      "usage: npm run trace:explain -- A.jsonl[,A2.jsonl...] [B.jsonl[,...]] [--limit N]",
    );
    process.exit(2);
  }
  const [a, b] = positionals.map((list) =>
    mergeTraces(list.split(",").map((p) => parseTrace(readFileSync(p, "utf8")))),
  );
  for (const line of explainTraces(a!, b, limit)) console.log(line);
}

runIfEntryPoint(import.meta.url, main);
