/**
 * The matrix chart (docs/chart-matrix.svg), hand-written SVG: one group of bars per cell of the
 * tenants family, one bar per series (a matrix run: real time, with --cpu-noise, model-time
 * replay), in two panels: the default's worst repeat as a share of the oracle's hit rate (goal line
 * at 0.97) and its mean TTFT as a share of the oracle's (goal line at 1).
 */
import type { CellSummary } from "./routing-matrix.js";

export interface MatrixSeries {
  name: string;
  summaries: readonly CellSummary[];
}

const SERIES_COLORS = ["#0891b2", "#f59e0b", "#6b7280", "#8b5cf6"];
const PANELS = [
  {
    title: "worst repeat / oracle hit rate",
    value: (s: CellSummary) => s.worstRatio,
    min: 0.9,
    max: 1.02,
    goal: 0.97,
  },
  {
    title: "mean TTFT / oracle (lower is better)",
    value: (s: CellSummary) => s.ttftMeanMs / s.oracleTtftMeanMs,
    min: 0,
    max: 1.6,
    goal: 1,
  },
];
const PANEL_H = 170;
const LEFT = 40;
const TOP = 48;

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

export function matrixChartSvg(series: readonly MatrixSeries[], caption: string): string {
  const cells: string[] = [];
  for (const s of series)
    for (const x of s.summaries) if (!cells.includes(x.cell)) cells.push(x.cell);
  const groupW = Math.max(56, 12 + series.length * 14);
  const width = LEFT + cells.length * groupW + 20;
  const height = TOP + PANELS.length * (PANEL_H + 30) + 10;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">`,
    `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  let lx = LEFT;
  series.forEach((s, i) => {
    out.push(
      `<rect x="${lx}" y="8" width="12" height="12" fill="${SERIES_COLORS[i % SERIES_COLORS.length]}"/>`,
      `<text x="${lx + 16}" y="18" font-size="12">${escapeXml(s.name)}</text>`,
    );
    lx += 30 + s.name.length * 7;
  });
  out.push(`<text x="${LEFT}" y="36" font-size="10" fill="#555">${escapeXml(caption)}</text>`);
  PANELS.forEach((panel, pi) => {
    const top = TOP + pi * (PANEL_H + 30);
    const plotTop = top + 18;
    const base = top + PANEL_H;
    const y = (v: number) =>
      base -
      ((Math.min(panel.max, Math.max(panel.min, v)) - panel.min) / (panel.max - panel.min)) *
        (base - plotTop);
    out.push(
      `<text x="${LEFT}" y="${top + 10}" font-size="12" font-weight="bold">${escapeXml(panel.title)}</text>`,
    );
    for (let g = 0; g <= 4; g++) {
      const v = panel.min + ((panel.max - panel.min) * g) / 4;
      out.push(
        `<line x1="${LEFT}" x2="${width - 10}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#e5e7eb"/>`,
        `<text x="${LEFT - 3}" y="${(y(v) + 3).toFixed(1)}" font-size="9" fill="#555" text-anchor="end">${v.toFixed(2)}</text>`,
      );
    }
    out.push(
      `<line x1="${LEFT}" x2="${width - 10}" y1="${y(panel.goal).toFixed(1)}" y2="${y(panel.goal).toFixed(1)}" stroke="#dc2626" stroke-dasharray="4 3"/>`,
    );
    cells.forEach((cell, ci) => {
      const gx = LEFT + ci * groupW + 6;
      series.forEach((s, si) => {
        const summary = s.summaries.find((x) => x.cell === cell);
        if (summary === undefined) return;
        const v = panel.value(summary);
        if (!Number.isFinite(v)) return;
        const x = gx + si * 14;
        out.push(
          `<rect x="${x}" y="${y(v).toFixed(1)}" width="11" height="${(base - y(v)).toFixed(1)}" fill="${SERIES_COLORS[si % SERIES_COLORS.length]}"><title>${escapeXml(`${cell}, ${s.name}: ${v.toFixed(3)}`)}</title></rect>`,
        );
      });
      out.push(
        `<text x="${gx + (series.length * 14) / 2}" y="${base + 12}" font-size="9" text-anchor="middle">${escapeXml(cell)}</text>`,
      );
    });
    out.push(`<line x1="${LEFT}" x2="${width - 10}" y1="${base}" y2="${base}" stroke="#9ca3af"/>`);
  });
  out.push("</svg>");
  return `${out.join("\n")}\n`;
}
