#!/usr/bin/env node
/**
 * Container health check: GET /health on the router's own port, exit 0 when it answers 2xx.
 *
 * The port comes from the same configuration the router read: this command's own flags when
 * given, else the flags of the router process (PID 1 in a container started in exec form, read
 * from /proc/1/cmdline), plus the RADIXGATE_* variables both processes share. So
 * `docker run radixgate --port 8080` is probed on 8080, not on the default.
 */
import { healthUrl, routerProcessArgs } from "./healthcheck-target.js";

async function main(): Promise<void> {
  const own = process.argv.slice(2);
  const url = healthUrl(own.length > 0 ? own : routerProcessArgs());
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  await res.body?.cancel();
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`radixgate healthcheck: ${(err as Error)?.message ?? String(err)}\n`);
    process.exit(1);
  },
);
