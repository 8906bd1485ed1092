import { randomBytes } from "node:crypto";
import type { Config } from "./config.js";
import type { ForwardSettings } from "./proxy/forward.js";

/** What the forwarder takes from the flags: its timeouts in ms, retries, keys, model routing. */
export function forwardSettings(config: Config): ForwardSettings {
  return {
    requestTimeoutMs: config.requestTimeoutSecs * 1000,
    firstByteTimeoutMs: config.firstByteTimeoutSecs * 1000,
    streamFirstByteTimeoutMs: config.streamFirstByteTimeoutSecs * 1000,
    idleTimeoutMs: config.idleTimeoutSecs * 1000,
    clientStallMs: config.clientStallSecs * 1000,
    retryMaxAttempts: config.retryMaxAttempts,
    retryInitialBackoffMs: config.retryInitialBackoffMs,
    retryMaxBackoffMs: config.retryMaxBackoffMs,
    maxCoolDownMs: config.maxCoolDownSecs * 1000,
    // Random per process: two replicas in a chain are not a loop, one router twice is.
    instanceId: randomBytes(4).toString("hex"),
    forwardAuthorization: config.apiKey === undefined,
    modelRouting: config.modelRouting,
  };
}
