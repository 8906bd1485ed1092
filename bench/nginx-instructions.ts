/**
 * What nginx executes per request, counted in instructions (valgrind's callgrind: user space,
 * independent of the machine's load), for plain nginx and for the nginx radixgate runs with
 * --data-plane nginx (and, with --base, another build's). Each row's nginx runs under callgrind;
 * after W warm-up requests its counters are zeroed, N requests of each mode are sent (C at a time)
 * to simulated engines, and the counts are dumped. Kernel work (sockets, wake-ups) is not counted:
 * bench:stream's CPU per chunk has it.
 *
 *   npm run bench:nginx-instructions                      json, stream, stream-usage; 200 each
 *   npm run bench:nginx-instructions -- --base <ref>      and another build's nginx side by side
 *   npm run bench:nginx-instructions -- --help
 *
 * Modes: json = a chat completion, not streamed (the usage filter reads its counts); stream = K
 * chunks, no include_usage (no script runs on the relay); stream-usage = K chunks with
 * stream_options.include_usage (the usage filter runs on each chunk). Needs valgrind and nginx
 * with its njs module.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Agent, request } from "node:http";
import os, { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildRef } from "./lib/build-ref.js";
import { startBuiltRouter } from "./lib/built-router.js";
import { commandLine, runIfEntryPoint } from "./lib/entry.js";
import { childFleetHost, pacedEngine } from "./lib/fleet.js";
import { findNginx, nginxHasNjs, startNginx } from "./lib/nginx.js";
import { startNginxFloor } from "./lib/nginx-floor.js";

const USAGE = `usage: npm run bench:nginx-instructions -- [flags]
  --requests N     requests per mode, counted (default 200)
  --warmup W       requests per mode before the counters are zeroed (default 20)
  --concurrency C  requests at a time (default 8)
  --chunks K       token chunks per streamed answer (default 20)
  --interval-ms I  ms between chunks (default 20: one read per chunk, whatever the load)
  --modes a,b      among json, stream, stream-usage (default all three)
  --rows a,b       among nginx, router-nginx, nginx-floor, base (default nginx, router-nginx,
                   nginx-floor; base with --base). nginx-floor: radixgate's nginx configuration
                   before a Node.js decider that answers every decision with a fixed redirect
                   (bench/lib/nginx-floor.ts): what nginx itself executes for that shape
  --base <ref>     another git ref's --data-plane nginx, built in a temporary directory
  --keep <dir>     copy the callgrind dumps there (for callgrind_annotate)
  --router-args="F" more radixgate flags for router-nginx and base, split at spaces
                   (e.g. "--health-check-interval-secs 0 --engine-poll-interval-secs 0")
  --decider        count the Node.js decider instead of nginx: radixgate's process (router-nginx,
                   base) or the floor's decider (nginx-floor), under callgrind; nginx runs plain
                   (the nginx row counts nothing then and is left out)`;

type Mode = "json" | "stream" | "stream-usage";
const MODES: readonly Mode[] = ["json", "stream", "stream-usage"];
type Row = "nginx" | "router-nginx" | "nginx-floor" | "base";

interface Options {
  requests: number;
  warmup: number;
  concurrency: number;
  chunks: number;
  intervalMs: number;
  modes: Mode[];
  rows: Row[];
  base: string | undefined;
  /** A directory the dumps are copied to (for callgrind_annotate). */
  keep: string | undefined;
  /** Count the decider's process, not nginx's. */
  decider: boolean;
  /** More radixgate flags (router-nginx, base). */
  routerArgs: string[];
}

/** One dump's instructions: the total, and each ELF object's own (self) share. */
export interface Counts {
  total: number;
  byObject: Map<string, number>;
}

/**
 * Reads a callgrind output file: the `summary:`/`totals:` line, and the self cost of each object
 * (a cost line after `calls=` is the call's inclusive cost, charged to the callee: skipped).
 */
export function parseCallgrind(text: string): Counts {
  const names = new Map<string, string>();
  const byObject = new Map<string, number>();
  let object = "?";
  let total = 0;
  let skipNext = false;
  const named = (spec: string) => {
    const m = /^\((\d+)\)(?: (.*))?$/.exec(spec);
    if (m === null) return spec;
    const [, id = "", name] = m;
    if (name !== undefined) names.set(id, name);
    return names.get(id) ?? id;
  };
  for (const line of text.split("\n")) {
    if (line.startsWith("ob=")) object = named(line.slice(3));
    else if (line.startsWith("cob=")) named(line.slice(4));
    else if (line.startsWith("calls=")) skipNext = true;
    else if (line.startsWith("summary:") || line.startsWith("totals:"))
      total = Math.max(total, Number(line.split(/\s+/)[1]));
    else if (/^[+-]?\d/.test(line)) {
      if (skipNext) skipNext = false;
      else {
        const cost = Number(line.split(/\s+/)[1] ?? 0);
        byObject.set(object, (byObject.get(object) ?? 0) + cost);
      }
    }
  }
  return { total, byObject };
}

function sumCounts(all: Counts[]): Counts {
  const byObject = new Map<string, number>();
  let total = 0;
  for (const c of all) {
    total += c.total;
    for (const [k, v] of c.byObject) byObject.set(k, (byObject.get(k) ?? 0) + v);
  }
  return { total, byObject };
}

/** The command a row's nginx runs under: its counts go to `dir`. */
function underCallgrind(dir: string): string[] {
  return ["valgrind", "-q", "--tool=callgrind", `--callgrind-out-file=${dir}/cg.%p`];
}

/** A shell script that runs nginx under callgrind (and plain nginx for `-V`): --nginx-binary. */
function valgrindWrapper(dir: string, nginx: string): string {
  const path = join(dir, "nginx-under-callgrind.sh");
  writeFileSync(
    path,
    `#!/bin/sh
if [ "$1" = "-V" ]; then exec ${nginx} "$@"; fi
exec ${underCallgrind(dir).join(" ")} ${nginx} "$@"
`,
  );
  chmodSync(path, 0o755);
  return path;
}

/** The processes running under this row's callgrind (their command line names its directory). */
function callgrindPids(dir: string): string[] {
  return readdirSync("/proc").filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      return cmd.includes(`--callgrind-out-file=${dir}/`) && !cmd.startsWith("/bin/sh");
    } catch {
      return false;
    }
  });
}

/** `callgrind_control <flag>` on this row's processes only (others may run callgrind too). */
function callgrindControl(flag: string, dir: string): void {
  const pids = callgrindPids(dir);
  for (const pid of pids)
    execFileSync("callgrind_control", [flag, pid], { stdio: "ignore", timeout: 120_000 });
}

const agent = new Agent({ keepAlive: true, maxSockets: 64 });

function send(url: string, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      {
        method: "POST",
        agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        timeout: 120_000,
      },
      (res) => {
        res.resume();
        res.on("end", () =>
          res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`)),
        );
      },
    );
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.end(body);
  });
}

async function load(url: string, mode: Mode, n: number, o: Options, tag: string): Promise<void> {
  let next = 0;
  const one = async () => {
    while (next < n) {
      const i = next++;
      await send(
        url,
        JSON.stringify({
          model: "m",
          messages: [{ role: "user", content: `${tag} ${mode} request ${i}: a short prompt` }],
          max_tokens: o.chunks,
          ...(mode === "json" ? {} : { stream: true }),
          ...(mode === "stream-usage" ? { stream_options: { include_usage: true } } : {}),
        }),
      );
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, one));
}

interface Result {
  row: Row;
  mode: Mode;
  perRequest: number;
  njsPerRequest: number;
}

async function measure(
  row: Row,
  url: string,
  dir: string,
  o: Options,
  results: Result[],
): Promise<void> {
  for (const mode of o.modes) {
    await load(url, mode, o.warmup, o, `${row} warm-up`);
    for (const f of readdirSync(dir)) if (f.startsWith("cg.")) rmSync(join(dir, f));
    callgrindControl("-z", dir);
    await load(url, mode, o.requests, o, row);
    callgrindControl("-d", dir);
    const counts = sumCounts(
      readdirSync(dir)
        .filter((f) => f.startsWith("cg."))
        .map((f) => parseCallgrind(readFileSync(join(dir, f), "utf8"))),
    );
    let njs = 0;
    for (const [object, cost] of counts.byObject) if (/http_js_module/.test(object)) njs += cost;
    const r = {
      row,
      mode,
      perRequest: counts.total / o.requests,
      njsPerRequest: njs / o.requests,
    };
    results.push(r);
    const top = [...counts.byObject]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([object, cost]) => `${object.split("/").pop()} ${Math.round(cost / o.requests)}`)
      .join(", ");
    console.log(
      `${row} ${mode}: ${Math.round(r.perRequest)} instructions per request (njs ${Math.round(r.njsPerRequest)}; by object: ${top})`,
    );
    if (o.keep !== undefined)
      for (const f of readdirSync(dir))
        if (f.startsWith("cg.") && f.includes("."))
          execFileSync("cp", [join(dir, f), join(o.keep, `${row}-${mode}-${f}`)]);
  }
}

export async function runNginxInstructions(o: Options): Promise<Result[]> {
  const nginx = findNginx();
  if (nginx === undefined || !nginxHasNjs()) throw new Error("needs nginx with its njs module");
  const host = await childFleetHost();
  const results: Result[] = [];
  try {
    const fleet = await host.startFleet({
      count: 2,
      worker: pacedEngine(o.intervalMs, 0, "m"),
    });
    const engines = fleet.workers.map((w) => w.url);
    for (const row of o.rows) {
      if (o.decider && row === "nginx") continue;
      const dir = mkdtempSync(join(tmpdir(), `radixgate-callgrind-${row}-`));
      const wrapper = o.decider ? nginx : valgrindWrapper(dir, nginx);
      const nginxWrap = o.decider ? [] : underCallgrind(dir);
      const deciderWrap = o.decider ? underCallgrind(dir) : [];
      let stop: () => Promise<void>;
      let url: string;
      let cleanup = () => {};
      if (row === "nginx") {
        const plain = await startNginx(engines, underCallgrind(dir));
        if (plain === undefined) throw new Error("nginx did not start");
        url = plain.url;
        stop = plain.stop;
      } else if (row === "nginx-floor") {
        const floor = await startNginxFloor(nginx, engines, nginxWrap, deciderWrap);
        url = floor.url;
        stop = floor.stop;
      } else {
        let cli: string | undefined;
        if (row === "base") {
          const built = buildRef(o.base as string);
          cli = built.cli;
          cleanup = () => rmSync(built.dir, { recursive: true, force: true });
        }
        const router = await startBuiltRouter(
          [
            "--data-plane",
            "nginx",
            "--nginx-binary",
            wrapper,
            ...o.routerArgs,
            "--worker-urls",
            ...engines,
          ],
          [],
          cli,
          undefined,
          deciderWrap,
        );
        url = router.url;
        stop = router.stop;
      }
      try {
        await measure(row, url, dir, o, results);
      } finally {
        await stop();
        cleanup();
        rmSync(dir, { recursive: true, force: true });
      }
    }
    await fleet.close();
  } finally {
    await host.close();
    agent.destroy();
  }
  return results;
}

function printTable(results: Result[], o: Options): void {
  console.log(
    `\n${o.decider ? "the decider's" : "nginx"} instructions per request (callgrind), ${o.requests} requests per mode, ${o.concurrency} at a time, K=${o.chunks} every ${o.intervalMs} ms`,
  );
  console.log(
    `| row | mode | per request | njs | over ${o.decider ? "the floor" : "plain nginx"} |`,
  );
  console.log("| --- | --- | --: | --: | --: |");
  for (const r of results) {
    const plain = results.find(
      (p) => p.row === (o.decider ? "nginx-floor" : "nginx") && p.mode === r.mode,
    );
    const over =
      plain === undefined || r === plain
        ? ""
        : `+${Math.round((r.perRequest - plain.perRequest) / 1000)}k`;
    console.log(
      `| ${r.row} | ${r.mode} | ${Math.round(r.perRequest / 1000)}k | ${Math.round(r.njsPerRequest / 1000)}k | ${over} |`,
    );
  }
}

function optionsFrom(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      requests: { type: "string" },
      warmup: { type: "string" },
      concurrency: { type: "string" },
      chunks: { type: "string" },
      "interval-ms": { type: "string" },
      modes: { type: "string" },
      rows: { type: "string" },
      base: { type: "string" },
      keep: { type: "string" },
      decider: { type: "boolean" },
      "router-args": { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const int = (name: string, v: string | undefined, d: number) => {
    const n = v === undefined ? d : Number(v);
    if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer`);
    return n;
  };
  const base = values.base;
  const list = <T extends string>(
    name: string,
    v: string | undefined,
    all: readonly T[],
    d: T[],
  ) => {
    if (v === undefined) return d;
    const items = v.split(",").map((x) => x.trim());
    for (const x of items)
      if (!all.includes(x as T)) throw new Error(`--${name}: ${x} is not among ${all.join(", ")}`);
    return items as T[];
  };
  const rows = list<Row>(
    "rows",
    values.rows,
    ["nginx", "router-nginx", "nginx-floor", "base"],
    ["nginx", "router-nginx", "nginx-floor", ...(base === undefined ? [] : (["base"] as const))],
  );
  if (rows.includes("base") && base === undefined) throw new Error("--rows base needs --base");
  return {
    requests: int("requests", values.requests, 200),
    warmup: int("warmup", values.warmup, 20),
    concurrency: int("concurrency", values.concurrency, 8),
    chunks: int("chunks", values.chunks, 20),
    intervalMs: int("interval-ms", values["interval-ms"], 20),
    modes: list<Mode>("modes", values.modes, MODES, [...MODES]),
    rows,
    base,
    keep: values.keep,
    decider: values.decider === true,
    routerArgs: (values["router-args"] ?? "").split(" ").filter((a) => a !== ""),
  };
}

runIfEntryPoint(import.meta.url, async () => {
  const o = optionsFrom(process.argv.slice(2));
  console.log(
    `${commandLine("bench:nginx-instructions")}\n${new Date().toISOString()}, load ${os.loadavg()[0]?.toFixed(1)}`,
  );
  const results = await runNginxInstructions(o);
  printTable(results, o);
});
