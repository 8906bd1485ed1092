/**
 * Launch simulated workers from the shell:
 *
 *   npx tsx sim/cli.ts --port 31001 --id w1 [--flavor vllm] [--time-scale 0.1] [...]
 *   npx tsx sim/cli.ts --count 4 --port 31001 --id w     # w1..w4 on 31001..31004
 *
 * Prints one line per worker with its URL; SIGINT/SIGTERM close every worker cleanly.
 */

import { pathToFileURL } from "node:url";
import { Command, InvalidArgumentError, Option } from "commander";
import { startedByNpm, watchParent } from "../src/parent-watch.js";
import type { SimFaults } from "./faults.js";
import { DEFAULT_NUMERIC_OPTIONS, NUMERIC_OPTIONS, type SimWorkerOptions } from "./options.js";
import { type SimWorker, startSimWorker } from "./worker.js";

export interface CliPlan {
  count: number;
  /** Options of each worker, in order. */
  workers: SimWorkerOptions[];
}

/** `--kv-capacity-tokens` for `kvCapacityTokens`. */
export function flagName(key: string): string {
  return `--${key.replace(/[A-Z0-9]+/g, (m) => `-${m.toLowerCase()}`)}`;
}

function parseNumber(integer: boolean, min: number) {
  return (raw: string): number => {
    const value = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(value) || value < min) {
      throw new InvalidArgumentError(`expected a number >= ${min}`);
    }
    if (integer && !Number.isInteger(value)) throw new InvalidArgumentError("expected an integer");
    return value;
  };
}

function commaList(raw: string): string[] {
  const names = raw.split(",").map((n) => n.trim());
  if (names.some((n) => n === "")) throw new InvalidArgumentError("expected comma-separated names");
  return names;
}

function buildCommand(): Command {
  const cmd = new Command("sim")
    .description("Run simulated SGLang/vLLM inference workers (no GPU) for tests and demos.")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option(
      "--port <port>",
      "port (with --count: the first of consecutive ports; 0 = random)",
      parseNumber(true, 0),
      0,
    )
    .option("--id <id>", "worker id (with --count: a prefix, numbered from 1)")
    .option("--count <n>", "number of workers to start", parseNumber(true, 1), 1)
    .addOption(
      new Option("--flavor <flavor>", "engine to mimic")
        .choices(["sglang", "vllm"])
        .default("sglang"),
    )
    .option("--model <name>", "served model name")
    .option(
      "--model-aliases <names>",
      "more served names of the model, comma-separated (vLLM --served-model-name)",
      commaList,
    )
    .option(
      "--lora-adapters <names>",
      "LoRA adapters served on the model, comma-separated (listed on /v1/models by vllm)",
      commaList,
    )
    .option(
      "--api-key <key>",
      "require Authorization: Bearer <key> (all but /health), as the engines do",
    )
    .addOption(
      new Option(
        "--role <role>",
        "prefill/decode disaggregation: prefill (hands its KV off) or decode (needs the hand-off)",
      ).choices(["prefill", "decode"]),
    )
    .option(
      "--bootstrap-port <port>",
      "SGLang prefill: the bootstrap server's port (SGLang --disaggregation-bootstrap-port; 0 = a free one)",
      parseNumber(true, 0),
    )
    .option(
      "--default-bootstrap-port <port>",
      "SGLang decode: the prefill bootstrap port when the router sends none (default 8998)",
      parseNumber(true, 1),
    )
    .option(
      "--enable-priority-scheduling",
      "order the queue by the body's priority as the flavor does (SGLang: this flag, higher first; vLLM: --scheduling-policy priority, lower first)",
    )
    .option(
      "--disable-priority-preemption",
      "SGLang: priority orders the queue only, never preempting (SGLang's flag)",
    )
    .option(
      "--step-rule <rule>",
      "mixed (vLLM v1: decode and prefill in every step; default) or prefill-first (SGLang: a step with prefill runs it alone)",
    );
  for (const spec of NUMERIC_OPTIONS) {
    cmd.option(
      `${flagName(spec.key)} <n>`,
      `${spec.description} (default ${DEFAULT_NUMERIC_OPTIONS[spec.key]})`,
      parseNumber(spec.integer, spec.min),
    );
  }
  return cmd
    .option(
      "--status <code>",
      "fault: answer every inference request with this status",
      parseNumber(true, 200),
    )
    .option("--fail-first <n>", "fault: fail the first N inference requests", parseNumber(true, 0))
    .option(
      "--fail-status <code>",
      "fault: status used by --fail-first (default 500)",
      parseNumber(true, 200),
    )
    .option("--hang", "fault: accept inference requests and never answer")
    .option("--crash-mid-stream <k>", "fault: destroy streams after K chunks", parseNumber(true, 0))
    .option("--slowdown <x>", "fault: multiply every delay", parseNumber(false, 0))
    .option("--unhealthy", "fault: /health answers 503");
}

/**
 * Parse argv (without the node and script entries) into one options object per worker. Throws
 * (commander's error, or RangeError) instead of exiting; `output` can silence commander's messages.
 */
export function planFromArgs(
  args: readonly string[],
  output?: { writeOut?: (s: string) => void; writeErr?: (s: string) => void },
): CliPlan {
  const cmd = buildCommand().exitOverride();
  if (output !== undefined) cmd.configureOutput(output);
  cmd.parse(args, { from: "user" });
  const o = cmd.opts<Record<string, unknown>>();
  const faults: Partial<SimFaults> = {};
  if (o.status !== undefined) faults.status = o.status as number;
  if (o.failFirst !== undefined) faults.failFirst = o.failFirst as number;
  if (o.failStatus !== undefined) faults.failStatus = o.failStatus as number;
  if (o.hang === true) faults.hang = true;
  if (o.crashMidStream !== undefined) faults.crashMidStream = o.crashMidStream as number;
  if (o.slowdown !== undefined) faults.slowdown = o.slowdown as number;
  if (o.unhealthy === true) faults.unhealthy = true;

  const base: SimWorkerOptions = {
    host: o.host as string,
    flavor: o.flavor as "sglang" | "vllm",
    faults,
  };
  if (o.model !== undefined) base.model = o.model as string;
  if (o.modelAliases !== undefined) base.modelAliases = o.modelAliases as string[];
  if (o.loraAdapters !== undefined) base.loraAdapters = o.loraAdapters as string[];
  if (o.apiKey !== undefined) base.apiKey = o.apiKey as string;
  if (o.role !== undefined) base.role = o.role as "prefill" | "decode";
  if (o.bootstrapPort !== undefined) base.bootstrapPort = o.bootstrapPort as number;
  if (o.defaultBootstrapPort !== undefined)
    base.defaultBootstrapPort = o.defaultBootstrapPort as number;
  if (o.enablePriorityScheduling === true) base.priorityScheduling = true;
  if (o.disablePriorityPreemption === true) base.disablePriorityPreemption = true;
  if (o.stepRule !== undefined) base.stepRule = o.stepRule as "mixed" | "prefill-first";
  for (const spec of NUMERIC_OPTIONS) {
    const value = o[spec.key];
    if (value !== undefined) base[spec.key] = value as number;
  }
  const count = o.count as number;
  const port = o.port as number;
  const id = o.id as string | undefined;
  if (port !== 0 && port + count - 1 > 65_535) throw new RangeError("ports beyond 65535");
  const workers: SimWorkerOptions[] = [];
  for (let i = 0; i < count; i++) {
    const worker: SimWorkerOptions = { ...base, port: port === 0 ? 0 : port + i };
    if (count === 1) {
      if (id !== undefined) worker.id = id;
    } else {
      worker.id = `${id ?? "w"}${i + 1}`;
    }
    workers.push(worker);
  }
  return { count, workers };
}

async function main(): Promise<void> {
  let plan: CliPlan;
  try {
    plan = planFromArgs(process.argv.slice(2));
  } catch (err) {
    // commander has already printed usage errors and help; exit with its code.
    const code = (err as { exitCode?: number }).exitCode;
    if (code === undefined) console.error(String((err as Error).message ?? err));
    process.exit(code ?? 2);
  }
  const workers: SimWorker[] = [];
  const closeAll = () => Promise.allSettled(workers.map((w) => w.close()));
  try {
    for (const options of plan.workers) {
      const w = await startSimWorker(options);
      workers.push(w);
      const role =
        w.role === undefined
          ? ""
          : ` ${w.role}${w.bootstrapPort === undefined ? "" : `, bootstrap port ${w.bootstrapPort}`}`;
      console.log(`sim worker ${w.id} (${w.flavor}${role}) listening on ${w.url}`);
    }
  } catch (err) {
    console.error(`failed to start: ${(err as Error).message}`);
    await closeAll();
    process.exit(1);
  }
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.log(`received ${signal}, closing ${workers.length} worker(s)`);
    void closeAll().then(() => process.exit(0));
  };
  process.on("SIGINT", () => stop("SIGINT"));
  process.on("SIGTERM", () => stop("SIGTERM"));
  // Under npm, a SIGTERM or SIGKILL to npm alone leaves this process orphaned: stop with it.
  if (startedByNpm()) watchParent(() => stop("the end of the npm process that started it"));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  void main();
}
