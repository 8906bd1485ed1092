import type { SchedulingContext, SchedulingWorker } from "../../src/scheduling/plugin.js";
import type { RouteRequest } from "../../src/scheduling/policy.js";
import type { LoadSignals } from "../../src/workers/signals.js";

/** A worker as the scheduling plugins read it; every signal settable. */
export interface TestWorker extends SchedulingWorker {
  inFlight: number;
  pendingPrefillChars: number;
  pendingPrefillRequests: number;
  activeChars: number;
  available: boolean;
  servedModels: ReadonlySet<string> | undefined;
  engine: LoadSignals | undefined;
  foreign: number | undefined;
}

export function worker(id: string, fields: Partial<TestWorker> = {}): TestWorker {
  const w: TestWorker = {
    id,
    inFlight: 0,
    pendingPrefillChars: 0,
    pendingPrefillRequests: 0,
    activeChars: 0,
    available: true,
    servedModels: undefined,
    engine: undefined,
    foreign: undefined,
    ...fields,
    signals: { load: () => w.engine },
    foreignQueuedAt: () => w.foreign,
  };
  return w;
}

/** A context over `workers`, every one alive. */
export function context(
  workers: readonly SchedulingWorker[],
  request: Partial<RouteRequest> = {},
): SchedulingContext {
  const text = request.text ?? "";
  return {
    candidates: workers,
    request: { ...request, text },
    now: Date.now(),
    length: text.length,
    alive: new Uint8Array(workers.length).fill(1),
  };
}

/** Runs one scorer and returns its scores. */
export function scores(
  scorer: { score(ctx: SchedulingContext, out: Float64Array): void },
  ctx: SchedulingContext,
): number[] {
  const out = new Float64Array(ctx.candidates.length);
  scorer.score(ctx, out);
  return [...out];
}

/** A source that replays `values` in turn. */
export function replay(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length]!;
}
