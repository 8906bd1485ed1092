// Explores the property tests beyond the suite's fixed seed: every test file that uses fast-check
// (directly or through a shared conformance/arbitraries file) runs with a fresh seed and at least
// --runs runs per property. A counterexample prints its seed; `--seed S` replays the whole run.
//   npm run test:props -- [--runs N] [--seed S] [--timeout MS] [-t test-name] [file filters...]
import { spawnSync } from "node:child_process";
import { randomInt } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";

const root = join(import.meta.dirname, "..");
const { values, positionals } = parseArgs({
  options: {
    runs: { type: "string", default: "1000" },
    seed: { type: "string" },
    timeout: { type: "string", default: "600000" },
    "test-name": { type: "string", short: "t" },
  },
  allowPositionals: true,
});
const runs = Number(values.runs);
const seed = values.seed === undefined ? randomInt(2 ** 31) : Number(values.seed);
const timeout = Number(values.timeout);
for (const [name, v] of [
  ["--runs", runs],
  ["--seed", seed],
  ["--timeout", timeout],
] as const) {
  if (!Number.isSafeInteger(v) || v < (name === "--runs" ? 1 : 0)) {
    console.error(`test:props: ${name} must be a whole number, got ${JSON.stringify(v)}`);
    process.exit(2);
  }
}

function walk(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}
const sources = walk(join(root, "test")).filter(
  (f) => !f.endsWith(join("helpers", "fast-check.ts")),
);
const text = new Map(sources.map((f) => [f, readFileSync(f, "utf8")]));
const users = new Set(sources.filter((f) => text.get(f)!.includes('from "fast-check"')));
// Test files that reach fast-check through a shared module (e.g. a conformance suite).
for (const f of sources) {
  for (const u of users) {
    const stem = relative(join(f, ".."), u).replace(/\.ts$/, "");
    if (!users.has(f) && text.get(f)!.includes(`${stem.startsWith(".") ? stem : `./${stem}`}.js"`))
      users.add(f);
  }
}
const files = [...users]
  .filter((f) => f.endsWith(".test.ts"))
  .map((f) => relative(root, f))
  .sort();
const chosen = positionals.length
  ? files.filter((f) => positionals.some((p) => f.includes(p)))
  : files;
if (chosen.length === 0) {
  console.error(`test:props: no property test file matches ${positionals.join(" ")}`);
  process.exit(2);
}

console.log(`test:props: seed ${seed}, at least ${runs} runs per property, ${chosen.length} files`);
const vitest = join(root, "node_modules", "vitest", "vitest.mjs");
const r = spawnSync(
  process.execPath,
  [
    vitest,
    "run",
    `--testTimeout=${timeout}`,
    `--hookTimeout=${timeout}`,
    ...(values["test-name"] === undefined ? [] : ["-t", values["test-name"]]),
    ...chosen,
  ],
  {
    cwd: root,
    stdio: "inherit",
    env: { ...process.env, RADIXGATE_PROPS_SEED: String(seed), RADIXGATE_PROPS_RUNS: String(runs) },
  },
);
console.log(`test:props: seed ${seed} (replay with --seed ${seed} --runs ${runs})`);
process.exit(r.status ?? 1);
