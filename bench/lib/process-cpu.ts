/**
 * CPU time of another process, read from Linux's /proc (user + system, in clock ticks of 10 ms).
 * bench:overhead reads it for the router, the bare Node.js proxy and nginx's worker before and
 * after each measurement: CPU per request does not depend on how busy the machine is, where
 * latency and requests per second do.
 */
import { existsSync, readFileSync } from "node:fs";

/** Linux's USER_HZ: /proc reports CPU times in these ticks. */
const TICKS_PER_SEC = 100;

/** The process's CPU time so far in µs, or undefined when /proc cannot tell (not Linux, gone). */
export function processCpuMicros(pid: number): number | undefined {
  const path = `/proc/${pid}/stat`;
  if (!existsSync(path)) return undefined;
  const stat = readFileSync(path, "utf8");
  // Fields after the command name, which is in parentheses and may itself hold spaces.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after "pid (comm) ".
  const ticks = Number(fields[11]) + Number(fields[12]);
  return Number.isFinite(ticks) ? (ticks * 1_000_000) / TICKS_PER_SEC : undefined;
}

/** The direct children of a process (nginx's worker under its master), from /proc. */
export function childPids(pid: number): number[] {
  const path = `/proc/${pid}/task/${pid}/children`;
  if (!existsSync(path)) return [];
  return readFileSync(path, "utf8")
    .trim()
    .split(/\s+/)
    .filter((s) => s !== "")
    .map(Number);
}

/** The process's resident set size in bytes (VmRSS in /proc/PID/status), undefined when gone. */
export function processRssBytes(pid: number): number | undefined {
  const path = `/proc/${pid}/status`;
  if (!existsSync(path)) return undefined;
  const match = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(path, "utf8"));
  return match === null ? undefined : Number(match[1]) * 1024;
}

/** A process and its descendants (a cluster's primary and its processes), from /proc. */
export function processTree(pid: number): number[] {
  const pids = [pid];
  for (let i = 0; i < pids.length && pids.length < 1024; i++) pids.push(...childPids(pids[i]!));
  return pids;
}
