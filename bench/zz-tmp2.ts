import { startBuiltRouter } from "./lib/built-router.js";
import { childFleetHost } from "./lib/fleet.js";
import { measure } from "./lib/overhead-requests.js";

const host = await childFleetHost();
const fleet = await host.startFleet({
  count: 4,
  worker: {
    timeScale: 1,
    stepFloorMs: 20,
    decodePerSeqMs: 0,
    kvReadMsPer1kTokens: 0,
    prefillTokensPerSec: 1e9,
    firstTokenDelayMs: 50,
    maxRunning: 500,
    maxBatchTokens: 1_000_000,
    kvCapacityTokens: 4_000_000,
  } as never,
});
const urls = fleet.workers.map((w: { url: string }) => w.url);
const plane = process.argv[2] ?? "nginx";
const r = await startBuiltRouter(
  ["--data-plane", plane, "--worker-urls", ...urls, ...process.argv.slice(3)],
  (process.env.NODEARGS ?? "").split(" ").filter(Boolean),
);
const distinct = Array.from({ length: 5000 }, (_, i) => `distinct ${i} tell me a story`);
for (const conc of [16, 16]) {
  const t0 = Date.now();
  const one = await measure(
    { url: r.url, pid: () => [r.pid] },
    distinct,
    true,
    conc,
    conc * 12,
    100,
  );
  console.log(
    `${plane} conc=${conc}: radixgate ${one.cpuMicrosPerRequest?.toFixed(0)} µs/req, ${one.requestsPerSec.toFixed(0)} req/s, errors ${one.errors}, ${Date.now() - t0} ms`,
  );
}
await r.stop();
await host.close();
