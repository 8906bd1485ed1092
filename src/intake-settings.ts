import type { Config } from "./config.js";
import type { IntakeOptions } from "./intake/intake.js";

/** What intake/ takes from the flags: the body's bounds in ms, the routing text, session, model. */
export function intakeOptions(config: Config, withTokenizeInput: boolean): IntakeOptions {
  return {
    body: {
      maxBytes: config.maxPayloadSize,
      totalTimeoutMs: config.bodyReadTimeoutSecs * 1000,
      idleTimeoutMs: config.bodyIdleTimeoutSecs * 1000,
      minBytesPerSec: config.bodyMinRateBytes,
    },
    parseOffloadBytes: config.parseOffloadBytes,
    maxRoutingTextChars: config.maxRoutingTextChars,
    withTokenizeInput,
    sessionAffinity: config.sessionAffinity,
    sessionHeader: config.sessionHeader,
    modelRouting: config.modelRouting,
  };
}
