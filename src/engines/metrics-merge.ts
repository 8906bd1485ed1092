/**
 * Several engines' Prometheus pages as one, as SGLang's router serves GET /engine_metrics
 * (sgl-model-gateway/src/core/metrics_aggregator.rs): every series gets a `worker_addr` label
 * naming the worker it came from, and each metric family is written once (its HELP and TYPE,
 * then its series from every worker), since a family split across a page is invalid text format.
 */

export interface MetricsPage {
  /** The worker's URL: the `worker_addr` label of its series. */
  workerAddr: string;
  text: string;
}

interface Family {
  help?: string;
  type?: string;
  samples: string[];
}

/** Suffixes a histogram's or summary's series add to its family name. */
const SUFFIXES = ["_bucket", "_sum", "_count", "_total", "_created", "_gsum", "_gcount"];

export function mergeMetricsPages(pages: readonly MetricsPage[]): string {
  const families = new Map<string, Family>();
  const family = (name: string) => {
    let f = families.get(name);
    if (f === undefined) {
      f = { samples: [] };
      families.set(name, f);
    }
    return f;
  };
  for (const page of pages) {
    const label = `worker_addr="${escapeLabel(page.workerAddr)}"`;
    // The families this page declared, so a sample finds its family by name or suffix.
    const declared = new Set<string>();
    for (const raw of page.text.split("\n")) {
      const line = raw.trimEnd();
      if (line === "") continue;
      if (line.startsWith("#")) {
        const m = /^#\s+(HELP|TYPE)\s+(\S+)\s*(.*)$/.exec(line);
        if (m === null) continue;
        const [, kind, name, rest] = m as unknown as [string, string, string, string];
        declared.add(name);
        const f = family(name);
        if (kind === "HELP") f.help ??= rest;
        else f.type ??= rest;
        continue;
      }
      const name = /^[A-Za-z_:][A-Za-z0-9_:]*/.exec(line)?.[0];
      if (name === undefined) continue;
      family(familyOf(name, declared)).samples.push(withLabel(line, name, label));
    }
  }
  const out: string[] = [];
  for (const [name, f] of families) {
    if (f.samples.length === 0) continue;
    if (f.help !== undefined) out.push(`# HELP ${name} ${f.help}`);
    if (f.type !== undefined) out.push(`# TYPE ${name} ${f.type}`);
    out.push(...f.samples);
  }
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
}

function familyOf(sample: string, declared: ReadonlySet<string>): string {
  if (declared.has(sample)) return sample;
  for (const suffix of SUFFIXES) {
    if (sample.endsWith(suffix)) {
      const base = sample.slice(0, -suffix.length);
      if (declared.has(base)) return base;
    }
  }
  return sample;
}

/** The sample line with `label` first among its labels. */
function withLabel(line: string, name: string, label: string): string {
  const rest = line.slice(name.length);
  if (rest.startsWith("{")) {
    const inner = rest.slice(1);
    return inner.startsWith("}") ? `${name}{${label}${inner}` : `${name}{${label},${inner}`;
  }
  return `${name}{${label}}${rest}`;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}
