import type { SaturationView } from "../../src/workers/saturation.js";
import { EngineSignals } from "../../src/workers/signals.js";

/** A worker whose engine queue the test sets. */
export class FakeWorker implements SaturationView {
  readonly signals = new EngineSignals();
  pendingPrefillRequests = 0;
  pendingPrefillChars = 0;
  constructor(readonly id: string) {}
  report(queued: number): void {
    this.signals.recordLoad({ queued, running: 4, kvUsage: 0.2, routerPending: 0 }, Date.now());
  }
}
