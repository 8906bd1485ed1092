/**
 * Runs `fn` with no RADIXGATE_* variables in process.env (the CLI reads them as flags), and puts
 * the environment back afterwards, whatever happens.
 */
export function withoutRadixgateEnv<T>(fn: () => T): T {
  const saved = { ...process.env };
  try {
    for (const name of Object.keys(process.env)) {
      if (name.startsWith("RADIXGATE_")) delete process.env[name];
    }
    return fn();
  } finally {
    process.env = saved;
  }
}
