/**
 * A neighbour that burns a core in random bursts (bench:routing --cpu-noise), so that the timing
 * of a run varies as it does on a shared host: a child process that spins for a random 5-250 ms,
 * sleeps a random 5-250 ms, and again, from a seeded generator, until it is stopped.
 */
import { type ChildProcess, spawn } from "node:child_process";

/** The child's program: a seeded mulberry32, busy and idle spells drawn from it. */
const NOISE_SCRIPT = `
let a = Number(process.argv[1]) >>> 0;
const rnd = () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
const spell = () => 5 + Math.floor(rnd() * 245);
let sink = 0;
const burst = () => { const end = Date.now() + spell(); while (Date.now() < end) sink += Math.sqrt(sink + 1);
  setTimeout(burst, spell()); };
process.on("disconnect", () => process.exit(0));
setTimeout(burst, spell());
`;

export interface CpuNoise {
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/** Starts the neighbour; `seed` fixes its spells (each repeat can take its own). */
export function startCpuNoise(seed: number): CpuNoise {
  const child: ChildProcess = spawn(process.execPath, ["-e", NOISE_SCRIPT, String(seed)], {
    stdio: ["ignore", "ignore", "inherit", "ipc"],
  });
  // Never outlive this process, whatever path it leaves by.
  const kill = () => child.kill("SIGKILL");
  process.once("exit", kill);
  return {
    pid: child.pid,
    stop: () =>
      new Promise<void>((resolve) => {
        process.removeListener("exit", kill);
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        const timer = setTimeout(resolve, 2000);
        child.once("exit", () => {
          clearTimeout(timer);
          resolve();
        });
        child.kill("SIGKILL");
      }),
  };
}
