/**
 * Router settings for the admission tests that hold requests at an engine's full batch: the
 * queue on with a queue depth of 1, engine readings 60 s apart (a test reads the engine itself,
 * `introspection.pollAll()`, so the router decides on that reading and its own live counts), and
 * waits long enough that a held request never times out within a test.
 */
export const HOLD_AT_FULL_BATCH = {
  queueWhenSaturated: true,
  saturationQueueDepth: 1,
  enginePollIntervalSecs: 60,
  queueTimeoutSecs: 60,
  firstByteTimeoutSecs: 60,
} as const;
