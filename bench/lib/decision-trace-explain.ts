/**
 * Offline reading of --decision-trace files (src/scheduling/decision-trace.ts): one trace's
 * summary (hit rate from the outcomes, decisions per worker, the decisions that left the best
 * holder), or where two runs of the same workload parted: each routing text is matched to its
 * counterpart by hash and occurrence, and the decisions that chose differently are listed in the
 * order the first run took them, each with both runs' candidates.
 *
 * Worker ids are hashes of their URLs, and a benchmark's fleets listen on new ports every run: two
 * traces name their workers by URL when they list the same URLs, else by the order in which each
 * trace first lists them (the router's worker list, the same in both runs), as w1, w2, ...
 */

/** One candidate: [worker, held chars, fill, in flight, queued prefill chars, cost | null]. */
export type TracedRow = [string, number, number, number, number, number | null];

export interface TracedDecision {
  n: number;
  t: number;
  h: string;
  len: number;
  m: string | null;
  c: TracedRow[];
  w: string;
  b: string;
  /** URLs of the workers this line lists for the first time (src/scheduling/decision-trace.ts). */
  u?: Record<string, string | null>;
  /** From the outcome line, when there was one. */
  prompt?: number;
  cached?: number;
}

export interface Trace {
  decisions: TracedDecision[];
  /** Lines that were not JSON or not a record (a trace cut short mid-line). */
  bad: number;
}

export function parseTrace(text: string): Trace {
  const byN = new Map<number, TracedDecision>();
  const decisions: TracedDecision[] = [];
  let bad = 0;
  for (const line of text.split("\n")) {
    if (line.trim() === "") continue;
    let r: Record<string, unknown>;
    try {
      r = JSON.parse(line) as Record<string, unknown>;
    } catch {
      bad++;
      continue;
    }
    if (r.k === "d" && typeof r.n === "number" && Array.isArray(r.c)) {
      const d = r as unknown as TracedDecision;
      byN.set(d.n, d);
      decisions.push(d);
    } else if (r.k === "o" && typeof r.n === "number") {
      const d = byN.get(r.n);
      if (d === undefined) {
        bad++;
        continue;
      }
      d.prompt = Number(r.p);
      d.cached = Number(r.c);
    } else {
      bad++;
    }
  }
  return { decisions, bad };
}

/** Every worker id in the order the trace first lists it, and the URLs its lines named. */
export function workersOf(trace: Trace): { order: string[]; urls: Map<string, string> } {
  const order: string[] = [];
  const seen = new Set<string>();
  const urls = new Map<string, string>();
  for (const d of trace.decisions) {
    for (const [id, url] of Object.entries(d.u ?? {})) if (url !== null) urls.set(id, url);
    for (const r of d.c) {
      if (seen.has(r[0])) continue;
      seen.add(r[0]);
      order.push(r[0]);
    }
  }
  return { order, urls };
}

/** `trace` with every worker id replaced by `names`' (ids it lacks stay). */
function renamed(trace: Trace, names: ReadonlyMap<string, string>): Trace {
  const name = (id: string) => names.get(id) ?? id;
  return {
    bad: trace.bad,
    decisions: trace.decisions.map((d) => ({
      ...d,
      w: name(d.w),
      c: d.c.map((r) => [name(r[0]), ...r.slice(1)] as TracedRow),
    })),
  };
}

/**
 * Two traces with one name per worker: its URL where both traces list the same URLs, else its
 * place in each trace's order of first appearance (w1, w2, ...). Workers are alike, so B's are
 * then renamed by the pairing under which the most texts went to the same worker (greedy over the
 * counts of texts A sent to x and B to y): runs that split the tenants alike but started them on
 * other workers do not differ.
 */
export function alignWorkers(a: Trace, b: Trace): [Trace, Trace] {
  const wa = workersOf(a);
  const wb = workersOf(b);
  const urlsA = new Set(wa.urls.values());
  const byUrl =
    wa.urls.size > 0 &&
    wa.urls.size === wa.order.length &&
    wb.urls.size === wb.order.length &&
    [...wb.urls.values()].every((u) => urlsA.has(u));
  const names = (w: { order: string[]; urls: Map<string, string> }) =>
    new Map(w.order.map((id, i) => [id, byUrl ? w.urls.get(id)! : `w${i + 1}`]));
  const na = renamed(a, names(wa));
  const nb = renamed(b, names(wb));
  const counts = new Map<string, number>();
  for (const [da, db] of pairs(na, nb)) {
    const k = `${da.w}\n${db.w}`;
    counts.set(k, (counts.get(k) ?? 0) + 1);
  }
  const pairing = new Map<string, string>();
  const taken = new Set<string>();
  for (const [k] of [...counts].sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))) {
    const [x, y] = k.split("\n") as [string, string];
    if (pairing.has(y) || taken.has(x)) continue;
    pairing.set(y, x);
    taken.add(x);
  }
  // B's workers no text paired keep their name unless A's worker of that name was taken.
  const free = [...names(wa).values()].filter((x) => !taken.has(x));
  for (const y of names(wb).values()) if (!pairing.has(y)) pairing.set(y, free.shift() ?? y);
  return [na, renamed(nb, pairing)];
}

/** The decisions of `a` and `b` on the same text, matched by its hash and occurrence. */
function pairs(a: Trace, b: Trace): [TracedDecision, TracedDecision][] {
  const keyed = (t: Trace) => {
    const seen = new Map<string, number>();
    const out = new Map<string, TracedDecision>();
    for (const d of t.decisions) {
      const i = seen.get(d.h) ?? 0;
      seen.set(d.h, i + 1);
      out.set(`${d.h}#${i}`, d);
    }
    return out;
  };
  const inB = keyed(b);
  const out: [TracedDecision, TracedDecision][] = [];
  for (const [key, da] of keyed(a)) {
    const db = inB.get(key);
    if (db !== undefined) out.push([da, db]);
  }
  return out;
}

/**
 * One run's traces from several routers (replicas behind a balancer, each writing its own file) as
 * one trace: every decision in the order of its clock, each with its own router's outcome.
 */
export function mergeTraces(traces: readonly Trace[]): Trace {
  const decisions = traces.flatMap((t) => t.decisions);
  // Stable: decisions of one router within one millisecond keep their order.
  decisions.sort((x, y) => x.t - y.t);
  return { decisions, bad: traces.reduce((sum, t) => sum + t.bad, 0) };
}

const heldBy = (d: TracedDecision, worker: string) => d.c.find((r) => r[0] === worker)?.[1] ?? 0;
const mostHeld = (d: TracedDecision) => Math.max(0, ...d.c.map((r) => r[1]));

export interface TraceSummary {
  decisions: number;
  hitRate: number;
  perWorker: Record<string, number>;
  /** Decisions whose choice held less than the best holder, and the characters it left. */
  leftHolder: number;
  leftChars: number;
}

export function summarizeTrace(trace: Trace): TraceSummary {
  let prompt = 0;
  let cached = 0;
  let leftHolder = 0;
  let leftChars = 0;
  const perWorker: Record<string, number> = {};
  for (const d of trace.decisions) {
    perWorker[d.w] = (perWorker[d.w] ?? 0) + 1;
    prompt += d.prompt ?? 0;
    cached += d.cached ?? 0;
    const gap = mostHeld(d) - heldBy(d, d.w);
    if (gap > 0) {
      leftHolder++;
      leftChars += gap;
    }
  }
  return {
    decisions: trace.decisions.length,
    hitRate: prompt === 0 ? Number.NaN : cached / prompt,
    perWorker,
    leftHolder,
    leftChars,
  };
}

export interface Divergence {
  key: string;
  a: TracedDecision;
  b: TracedDecision;
}

/**
 * The decisions of `a` and `b` on the same text (hash and occurrence) that chose differently, the
 * workers named as alignWorkers does.
 */
export function divergences(a: Trace, b: Trace): { matched: number; differ: Divergence[] } {
  [a, b] = alignWorkers(a, b);
  const matched = pairs(a, b);
  const differ: Divergence[] = [];
  for (const [da, db] of matched) {
    if (da.w !== db.w) differ.push({ key: keyOf(a, da), a: da, b: db });
  }
  differ.sort((x, y) => x.a.n - y.a.n);
  return { matched: matched.length, differ };
}

/** `d`'s text hash and occurrence in `t` (h#i), as divergences names it. */
function keyOf(t: Trace, d: TracedDecision): string {
  let i = 0;
  for (const x of t.decisions) {
    if (x === d) break;
    if (x.h === d.h) i++;
  }
  return `${d.h}#${i}`;
}

function rows(d: TracedDecision): string[] {
  return d.c.map(
    ([id, held, fill, inFlight, queued, cost]) =>
      `    ${id === d.w ? "*" : " "} ${id.padEnd(10)} held ${String(held).padStart(7)}  fill ${fill.toFixed(2)}  in flight ${String(inFlight).padStart(3)}  queued ${String(queued).padStart(7)}  cost ${cost === null ? "-" : String(cost).padStart(8)}`,
  );
}

const outcome = (d: TracedDecision) =>
  d.prompt === undefined ? "no outcome" : `cached ${d.cached}/${d.prompt} tokens`;

/** The report, as lines: one trace's summary, or two traces' summaries and where they parted. */
export function explainTraces(a: Trace, b?: Trace, limit = 10): string[] {
  const line = (name: string, t: Trace) => {
    const s = summarizeTrace(t);
    return `${name}: ${s.decisions} decisions, hit rate ${(s.hitRate * 100).toFixed(1)}%, left the best holder ${s.leftHolder} times (${s.leftChars} chars), per worker ${JSON.stringify(s.perWorker)}${t.bad > 0 ? `, ${t.bad} bad lines` : ""}`;
  };
  const out = [line("A", a)];
  if (b === undefined) {
    const left = a.decisions.filter((d) => mostHeld(d) > heldBy(d, d.w));
    left.sort((x, y) => mostHeld(y) - heldBy(y, y.w) - (mostHeld(x) - heldBy(x, x.w)));
    for (const d of left.slice(0, limit)) {
      out.push(`  #${d.n} ${d.h} (${d.len} chars, ${d.b}) → ${d.w}, ${outcome(d)}`, ...rows(d));
    }
    return out;
  }
  out.push(line("B", b));
  [a, b] = alignWorkers(a, b);
  const { matched, differ } = divergences(a, b);
  out.push(
    `${matched} texts in both, ${differ.length} routed differently${differ.length > 0 ? `; the first ${Math.min(limit, differ.length)} in A's order:` : ""}`,
  );
  for (const { key, a: da, b: db } of differ.slice(0, limit)) {
    out.push(`  ${key} (${da.len} chars)`);
    out.push(`   A #${da.n} → ${da.w} (${da.b}), ${outcome(da)}`, ...rows(da));
    out.push(`   B #${db.n} → ${db.w} (${db.b}), ${outcome(db)}`, ...rows(db));
  }
  return out;
}
