import type { Cancel } from "./cancel.js";

/** Exponential backoff with full jitter: a random delay in [0, min(max, initial * 2^(retry-1))]. */
export function backoffMs(
  retry: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.max(0, retry - 1));
  return Math.round(random() * ceiling);
}

/** Retry-After as milliseconds (delta-seconds or an HTTP date), or undefined when absent/invalid. */
export function retryAfterMs(
  value: string | string[] | undefined,
  now: number = Date.now(),
): number | undefined {
  const raw = Array.isArray(value) ? value[0] : value;
  if (raw === undefined || raw.trim() === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(raw.trim())) return Math.round(Number(raw) * 1000);
  const date = Date.parse(raw);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

export function sleep(ms: number, signal?: Cancel): Promise<void> {
  return new Promise((resolve) => {
    if (ms <= 0 || signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal?.once("abort", done);
    function done() {
      clearTimeout(timer);
      signal?.off("abort", done);
      resolve();
    }
  });
}
