/**
 * The routing chart (docs/chart-routing.svg), hand-written SVG: one column per workload, one row
 * per metric (mean TTFT, fleet prefix-cache hit rate), one bar per policy in a fixed colour: the
 * mean over the repeats, with a line from the worst to the best repeat (--repeats, issue 27).
 */
import type { RowLabel, WorkloadReport } from "./routing-runner.js";

const COLORS: Record<string, string> = {
  cache_aware: "#2563eb",
  round_robin: "#dc2626",
  random: "#f59e0b",
  power_of_two: "#8b5cf6",
  least_load: "#10b981",
  prefix_cost: "#0891b2",
  precise: "#1e3a8a",
  oracle_sticky: "#6b7280",
  // The seed systems' profiles (issue 22).
  aibrix_prefix: "#be185d",
  llmd_approx: "#65a30d",
  precise_weighted: "#7c2d12",
  chwbl: "#ea580c",
  dynamo_cost: "#4d7c0f",
};

type Row = WorkloadReport["rows"][number];

interface Metric {
  title: string;
  value: (r: Row) => number;
  /** The repeats' lowest and highest value, in the metric's unit; undefined without repeats. */
  range: (r: Row) => [number, number] | undefined;
  label: (v: number) => string;
}

const METRICS: Metric[] = [
  {
    title: "mean TTFT (ms)",
    value: (r) => r.ttftMs.mean,
    range: (r) =>
      r.spread === undefined ? undefined : [r.spread.ttftMeanMs.min, r.spread.ttftMeanMs.max],
    label: (v) => v.toFixed(0),
  },
  {
    title: "cache hit rate (%)",
    value: (r) => r.hitRate * 100,
    range: (r) =>
      r.spread === undefined ? undefined : [r.spread.hitRate.min * 100, r.spread.hitRate.max * 100],
    label: (v) => v.toFixed(0),
  },
];

const MIN_PANEL_W = 230;
const PANEL_H = 170;
const PLOT_TOP = 28;
const PLOT_BOTTOM = 18;
const MARGIN_X = 30;
const LEGEND_H = 44;

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** A round axis maximum at or above `v` (1, 2, 2.5, 5 × 10^k). */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const exp = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * exp >= v) return m * exp;
  return 10 * exp;
}

/** `defaultRow`: the router's default policy, outlined and marked "(default)" in the legend. */
export function routingChartSvg(
  reports: readonly WorkloadReport[],
  caption: string,
  defaultRow?: string,
): string {
  const rowNames: RowLabel[] = [];
  for (const report of reports) {
    for (const r of report.rows) if (!rowNames.includes(r.row)) rowNames.push(r.row);
  }
  // Wide enough for a readable bar per row.
  const PANEL_W = Math.max(MIN_PANEL_W, 30 + rowNames.length * 18);
  const width = MARGIN_X + reports.length * PANEL_W + 10;
  const height = LEGEND_H + METRICS.length * PANEL_H + 24;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  );
  // Legend.
  let lx = MARGIN_X;
  for (const name of rowNames) {
    out.push(
      `<rect x="${lx}" y="10" width="12" height="12" fill="${COLORS[baseOf(name)] ?? "#000"}"/>`,
      `<text x="${lx + 16}" y="20" font-size="12"${name === defaultRow ? ' font-weight="bold"' : ""}>${escapeXml(name === defaultRow ? `${name} (default)` : name)}</text>`,
    );
    lx += 24 + (name === defaultRow ? name.length + 10 : name.length) * 7;
  }
  out.push(`<text x="${MARGIN_X}" y="38" font-size="10" fill="#555">${escapeXml(caption)}</text>`);

  METRICS.forEach((metric, mi) => {
    const top = LEGEND_H + mi * PANEL_H;
    reports.forEach((report, wi) => {
      const left = MARGIN_X + wi * PANEL_W;
      const plotH = PANEL_H - PLOT_TOP - PLOT_BOTTOM;
      const base = top + PLOT_TOP + plotH;
      const values = report.rows
        .flatMap((r) => [metric.value(r), metric.range(r)?.[1] ?? 0])
        .filter((v) => Number.isFinite(v));
      const max = niceMax(Math.max(0, ...values));
      out.push(
        `<text x="${left + PANEL_W / 2 - 8}" y="${top + 14}" font-size="12" font-weight="bold" text-anchor="middle">${escapeXml(`${report.workload}: ${metric.title}`)}</text>`,
      );
      for (let g = 0; g <= 4; g++) {
        const y = base - (plotH * g) / 4;
        out.push(
          `<line x1="${left}" x2="${left + PANEL_W - 20}" y1="${y}" y2="${y}" stroke="#e5e7eb"/>`,
          `<text x="${left - 3}" y="${y + 3}" font-size="9" fill="#555" text-anchor="end">${escapeXml(trimNumber((max * g) / 4))}</text>`,
        );
      }
      const slot = (PANEL_W - 30) / rowNames.length;
      rowNames.forEach((name, ri) => {
        const row = report.rows.find((r) => r.row === name);
        if (row === undefined) return;
        const v = metric.value(row);
        if (!Number.isFinite(v)) return;
        const h = (plotH * Math.max(0, v)) / max;
        const x = left + 4 + ri * slot;
        const mid = x + (slot - 6) / 2;
        const range = metric.range(row);
        const spread =
          range !== undefined && range[1] > range[0]
            ? ` (repeats ${metric.label(range[0])}-${metric.label(range[1])})`
            : "";
        out.push(
          `<rect x="${x.toFixed(1)}" y="${(base - h).toFixed(1)}" width="${(slot - 6).toFixed(1)}" height="${h.toFixed(1)}" fill="${COLORS[baseOf(name)] ?? "#000"}"${name === defaultRow ? ' stroke="#000" stroke-width="1.5"' : ""}><title>${escapeXml(`${name}: ${metric.label(v)}${spread}`)}</title></rect>`,
        );
        let top = base - h;
        if (range !== undefined && range[1] > range[0]) {
          const y0 = base - (plotH * Math.max(0, range[0])) / max;
          const y1 = base - (plotH * Math.max(0, range[1])) / max;
          top = Math.min(top, y1);
          for (const [xa, ya, xb, yb] of [
            [mid, y0, mid, y1],
            [mid - 3, y0, mid + 3, y0],
            [mid - 3, y1, mid + 3, y1],
          ] as const) {
            out.push(
              `<line x1="${xa.toFixed(1)}" y1="${ya.toFixed(1)}" x2="${xb.toFixed(1)}" y2="${yb.toFixed(1)}" stroke="#111827" stroke-width="1"/>`,
            );
          }
        }
        out.push(
          `<text x="${mid.toFixed(1)}" y="${(top - 3).toFixed(1)}" font-size="9" text-anchor="middle">${escapeXml(metric.label(v))}</text>`,
        );
      });
      out.push(
        `<line x1="${left}" x2="${left + PANEL_W - 20}" y1="${base}" y2="${base}" stroke="#9ca3af"/>`,
      );
    });
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}

/** A variant row (`prefix_cost:poll-frozen`) takes its base row's colour. */
function baseOf(label: string): string {
  const colon = label.indexOf(":");
  return colon < 0 ? label : label.slice(0, colon);
}

function trimNumber(v: number): string {
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}
