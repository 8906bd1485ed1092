import { createLogger } from "../src/logger.js";
import { startRouter } from "../src/server.js";
import { childFleetHost } from "./lib/fleet.js";
import { routerConfig } from "./lib/routing-runner.js";

const host = await childFleetHost();
const t = () => performance.now();
for (let i = 0; i < 4; i++) {
  let a = t();
  const fleet = await host.startFleet({
    count: 4,
    worker: { timeScale: 0.2, kvCapacityTokens: 12000 },
  });
  const f = t() - a;
  a = t();
  const r = await startRouter(
    routerConfig(
      "prefix_cost",
      fleet.workers.map((w) => w.url),
      {},
    ),
    { logger: createLogger({ level: "silent" }) },
  );
  const s = t() - a;
  a = t();
  await r.stop(1000);
  const st = t() - a;
  a = t();
  await fleet.close();
  const c = t() - a;
  console.log({
    fleet: f.toFixed(0),
    router: s.toFixed(0),
    stop: st.toFixed(0),
    close: c.toFixed(0),
  });
}
await host.close();
