/**
 * Runs around every test file (vitest.config.ts setupFiles). Most files share their worker
 * process with the files before and after them, so what a file changes for the whole process is
 * put back when it ends: real timers (a failing test may leave fake ones on, which would stop the
 * next file's timers) and process.env.
 */
import { afterAll, vi } from "vitest";

const env = { ...process.env };

afterAll(() => {
  vi.useRealTimers();
  for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name];
  Object.assign(process.env, env);
});
