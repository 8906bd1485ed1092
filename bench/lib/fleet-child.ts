/**
 * The child-process side of childFleetHost(): starts and closes simulated workers on request,
 * and exits on "exit" or when the parent goes away (never lingering as an orphan holding ports).
 */
import type { SimWorker } from "../../sim/worker.js";
import { type FleetReply, type FleetRequest, memberOf, startSimWorkers } from "./fleet.js";

/** Workers by URL (ids repeat across fleets). */
const running = new Map<string, SimWorker>();
let exiting = false;

function reply(msg: FleetReply): void {
  if (process.connected) process.send?.(msg);
}

async function exit(): Promise<void> {
  if (exiting) return;
  exiting = true;
  await Promise.allSettled([...running.values()].map((s) => s.close()));
  process.exit(0);
}

process.on("message", (msg: FleetRequest) => {
  if (msg.type === "exit") {
    void exit();
    return;
  }
  void (async () => {
    try {
      if (msg.type === "start") {
        const sims = await startSimWorkers(msg.workers);
        for (const s of sims) running.set(s.url, s);
        reply({
          type: "started",
          seq: msg.seq,
          workers: sims.map(memberOf),
        });
      } else {
        const sims = msg.urls.map((url) => running.get(url)).filter((s) => s !== undefined);
        for (const url of msg.urls) running.delete(url);
        await Promise.all(sims.map((s) => s.close()));
        reply({ type: "closed", seq: msg.seq });
      }
    } catch (err) {
      reply({ type: "error", seq: msg.seq, message: (err as Error).message });
    }
  })();
});

process.on("disconnect", () => void exit());
