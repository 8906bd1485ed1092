/**
 * The top frames of a V8 CPU profile (`node --cpu-prof`) by self time, summed per function and
 * file, with the share of busy (non-idle) samples. For the profile tables of docs/benchmarks/:
 *
 *   npx tsx scripts/cpuprofile-top.ts <file.cpuprofile> [count] [--callers <function name>]
 *
 * `--callers NAME` also lists who called NAME: the nearest three frames of our code or a library's, by self time spent in NAME under each.
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const CALLER_DEPTH = 3;
const IDLE = new Set(["(idle)", "(program)"]);

/** A library's file from node_modules/ on (`node_modules/undici/lib/...`), any other file's name. */
function shortFile(url: string): string {
  const library = url.lastIndexOf("/node_modules/");
  return library >= 0 ? url.slice(library + 1) : url.slice(url.lastIndexOf("/") + 1);
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url === "" ? "" : ` ${shortFile(url)}:${lineNumber + 1}`;
  return `${functionName === "" ? "(anonymous)" : functionName}${file}`;
}

function main(): void {
  const args = process.argv.slice(2);
  const callersAt = args.indexOf("--callers");
  const callersOf = callersAt === -1 ? undefined : args[callersAt + 1];
  const positional = args.filter(
    (_, i) => callersAt === -1 || (i !== callersAt && i !== callersAt + 1),
  );
  const [file, countArg] = positional;
  if (file === undefined) {
    console.error("usage: cpuprofile-top.ts <file.cpuprofile> [count] [--callers NAME]");
    process.exit(2);
  }
  const count = Number(countArg ?? 25);
  const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => {
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  });
  let totalUs = 0;
  let idleUs = 0;
  const byFrame = new Map<string, number>();
  const callers = new Map<string, number>();
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (node === undefined) continue;
    totalUs += us;
    if (IDLE.has(node.callFrame.functionName)) {
      idleUs += us;
      continue;
    }
    const name = frameName(node);
    byFrame.set(name, (byFrame.get(name) ?? 0) + us);
    if (callersOf !== undefined && node.callFrame.functionName === callersOf) {
      // The chain of callers, nearest first, a few levels up (Node's own stream frames hide who wrote).
      const chain: string[] = [];
      for (
        let up = byId.get(parent.get(id) ?? -1);
        up !== undefined && chain.length < CALLER_DEPTH;
        up = byId.get(parent.get(up.id) ?? -1)
      ) {
        // Node's own frames (node:net, stream internals) say how, not who: skip to our code or a library's.
        const url = up.callFrame.url;
        if (url !== "" && !url.startsWith("node:")) chain.push(frameName(up));
      }
      const caller = chain.length === 0 ? "(root)" : chain.join(" < ");
      callers.set(caller, (callers.get(caller) ?? 0) + us);
    }
  }
  const busyUs = totalUs - idleUs;
  console.log(
    `${(totalUs / 1e6).toFixed(1)} s sampled, ${(busyUs / 1e6).toFixed(2)} s busy (${((100 * busyUs) / totalUs).toFixed(1)}%)`,
  );
  const rows = [...byFrame].sort((a, b) => b[1] - a[1]).slice(0, count);
  for (const [name, us] of rows) {
    console.log(
      `${(us / 1000).toFixed(0).padStart(8)} ms ${((100 * us) / busyUs).toFixed(1).padStart(5)}%  ${name}`,
    );
  }
  if (callersOf !== undefined) {
    console.log(`\ncallers of ${callersOf}:`);
    for (const [name, us] of [...callers].sort((a, b) => b[1] - a[1]).slice(0, count)) {
      console.log(`${(us / 1000).toFixed(0).padStart(8)} ms  ${name}`);
    }
  }
}

main();
