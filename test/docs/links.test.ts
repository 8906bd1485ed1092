/**
 * Issue 21 item 8: every relative markdown link in README.md and docs/ resolves, anchor
 * included. docs/benchmarks.md became a summary and its dated log moved to docs/benchmarks/, so
 * links into the log's sections (from the README, the other pages and each other) would otherwise
 * break silently. Anchors follow GitHub's heading ids: lower case, punctuation dropped, spaces to
 * hyphens, a repeated heading numbered -1, -2, ...
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = new URL("../../", import.meta.url).pathname;

/** README.md and every markdown file under docs/. */
function markdownFiles(): string[] {
  const found = [join(ROOT, "README.md")];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (name.endsWith(".md")) found.push(path);
    }
  };
  walk(join(ROOT, "docs"));
  return found;
}

/** The lines outside fenced code blocks, with inline code spans blanked. */
function proseLines(text: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of text.split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) out.push(line.replace(/`[^`]*`/g, (code) => " ".repeat(code.length)));
  }
  return out;
}

/** GitHub's id for a heading's text. */
function headingSlug(heading: string): string {
  return heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-");
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  const cached = anchorCache.get(file);
  if (cached) return cached;
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading?.[1] !== undefined) {
      const base = headingSlug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) if (m[1]) anchors.add(m[1]);
  }
  anchorCache.set(file, anchors);
  return anchors;
}

/** Relative link targets of a markdown file: inline links, images and reference definitions. */
function linkTargets(text: string): string[] {
  const targets: string[] = [];
  for (const line of proseLines(text)) {
    for (const m of line.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      if (m[1]) targets.push(m[1]);
    }
    const def = /^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(\s|$)/.exec(line);
    if (def?.[1]) targets.push(def[1]);
  }
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t));
}

/** Why a link from `file` to `target` does not resolve, or undefined when it does. */
function brokenReason(file: string, target: string): string | undefined {
  const hash = target.indexOf("#");
  const pathPart = decodeURIComponent(hash === -1 ? target : target.slice(0, hash));
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1));
  const dest = pathPart === "" ? file : resolve(dirname(file), pathPart);
  if (!existsSync(dest)) return "no such file";
  if (anchor === undefined || anchor === "" || !dest.endsWith(".md")) return undefined;
  return anchorsOf(dest).has(anchor) ? undefined : `no heading with id #${anchor}`;
}

describe("markdown links in README.md and docs/", () => {
  it("computes GitHub's heading ids", () => {
    expect(headingSlug("Routing core (bench:tree)")).toBe("routing-core-benchtree");
    expect(headingSlug("The block-hash index (`--prefix-index block_hash`)")).toBe(
      "the-block-hash-index---prefix-index-block_hash",
    );
    expect(headingSlug("The scheduling pipeline's cost per decision")).toBe(
      "the-scheduling-pipelines-cost-per-decision",
    );
  });

  it("every relative link and anchor resolves", () => {
    const broken: string[] = [];
    let checked = 0;
    for (const file of markdownFiles()) {
      for (const target of linkTargets(readFileSync(file, "utf8"))) {
        checked += 1;
        const reason = brokenReason(file, target);
        if (reason) broken.push(`${relative(ROOT, file)}: (${target}) ${reason}`);
      }
    }
    expect(checked).toBeGreaterThan(50);
    expect(broken).toEqual([]);
  });

  it("docs/benchmarks.md links every file of its dated log", () => {
    const page = readFileSync(join(ROOT, "docs/benchmarks.md"), "utf8");
    const logs = readdirSync(join(ROOT, "docs/benchmarks")).filter((n) => n.endsWith(".md"));
    expect(logs.length).toBeGreaterThan(0);
    for (const name of logs) expect(page, name).toContain(`(benchmarks/${name}`);
  });
});
