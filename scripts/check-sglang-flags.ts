/**
 * Compares test/sglang-gateway-flags.ts (the SGLang gateway flags radixgate's compatibility table
 * is tested against) with a copy of SGLang's router_args.py, e.g. after SGLang adds flags:
 *
 *   npx tsx scripts/check-sglang-flags.ts path/to/router_args.py
 *
 * Prints the flags only one side has and exits 1 if there are any; update the list (and
 * src/compat-flags.ts, which the per-flag test then requires) from the output.
 */
import { readFileSync } from "node:fs";
import { SGLANG_GATEWAY_FLAGS } from "../test/sglang-gateway-flags.js";

const path = process.argv[2];
if (path === undefined) {
  process.stderr.write("usage: npx tsx scripts/check-sglang-flags.ts <router_args.py>\n");
  process.exit(2);
}
const source = readFileSync(path, "utf8");
// Flags are declared as "--name" or f"--{prefix}name" in add_argument calls.
const declared = new Set(
  [...source.matchAll(/"--(?:\{prefix\})?([a-z0-9][a-z0-9-]*)"/g)].map((m) => `--${m[1]}`),
);
const listed = new Set(SGLANG_GATEWAY_FLAGS.map((f) => f.flag));
const missing = [...declared].filter((f) => !listed.has(f));
const gone = [...listed].filter((f) => !declared.has(f));
for (const f of missing) process.stdout.write(`in router_args.py, not in the list: ${f}\n`);
for (const f of gone) process.stdout.write(`in the list, not in router_args.py: ${f}\n`);
if (missing.length + gone.length === 0) process.stdout.write(`${listed.size} flags, same set\n`);
process.exit(missing.length + gone.length === 0 ? 0 : 1);
