import type { CommanderError } from "commander";
import { COMPAT_FLAGS } from "./compat-flags.js";
import { SETTINGS } from "./config.js";

/** Every flag radixgate accepts: its own and the SGLang router's it translates. */
function knownFlags(): string[] {
  return [
    ...SETTINGS.map((s) => s.flag),
    ...COMPAT_FLAGS.map((c) => c.flag),
    "--help",
    "--version",
  ];
}

/** Optimal string alignment distance (Levenshtein plus adjacent swaps), as typos go. */
function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        best = Math.min(best, d[i - 2]![j - 2]! + 1);
      }
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** The known flag closest to `typed`, if one is close enough to be the intended one. */
export function closestFlag(
  typed: string,
  flags: readonly string[] = knownFlags(),
): string | undefined {
  const name = typed.split("=", 1)[0]!;
  let best: { flag: string; distance: number } | undefined;
  for (const flag of flags) {
    const distance = editDistance(name, flag);
    if (best === undefined || distance < best.distance) best = { flag, distance };
  }
  if (best === undefined || best.distance === 0) return undefined;
  // Up to 3 edits, and at most 40% of the flag's own characters (after its "--").
  const limit = Math.min(3, Math.floor((best.flag.length - 2) * 0.4));
  return best.distance <= limit ? best.flag : undefined;
}

/**
 * A command-line error from commander as the one line the CLI prints after `radixgate: error: `
 * (commander's own output is silenced): the problem, a "did you mean" for an unknown flag that
 * is close to a known one, and where the flags are listed.
 */
export function commanderErrorLine(err: CommanderError): string {
  const message = err.message
    .split("\n")[0]!
    .replace(/^error: /, "")
    .replace(/\.$/, "");
  let line = message;
  if (err.code === "commander.unknownOption") {
    const typed = /'([^']+)'/.exec(message)?.[1];
    const suggestion = typed === undefined ? undefined : closestFlag(typed);
    if (suggestion !== undefined) line += ` (did you mean ${suggestion}?)`;
  }
  return `${line}; radixgate --help lists every flag`;
}
