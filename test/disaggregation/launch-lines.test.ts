import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { parseArgv } from "../../src/cli-options.js";
import { createLogger } from "../../src/logger.js";
import { startRouter } from "../../src/server.js";
import { withoutRadixgateEnv } from "../helpers/clean-env.js";
import { postJson } from "../helpers/router.js";
import { events } from "./pd-fleet.js";

const DOC = join(import.meta.dirname, "..", "..", "docs", "disaggregation.md");
const LAUNCHER = "python -m sglang_router.launch_router";

/** The SGLang launch lines docs/disaggregation.md quotes (each after a pd-launch-lines marker). */
function launchLines(): { source: string; argv: string[] }[] {
  const text = readFileSync(DOC, "utf8");
  const out: { source: string; argv: string[] }[] = [];
  const marker = /<!-- pd-launch-lines: from (.+?) -->\n```bash\n([\s\S]*?)```/g;
  for (const m of text.matchAll(marker)) {
    const line = m[2]!.replace(/\\\n/g, " ").trim();
    expect(line.startsWith(LAUNCHER), line).toBe(true);
    out.push({ source: m[1]!, argv: line.slice(LAUNCHER.length).trim().split(/\s+/) });
  }
  return out;
}

/** Runs parseArgv with a clean RADIXGATE_* environment. */
function parse(argv: string[]) {
  return withoutRadixgateEnv(() => parseArgv(argv));
}

describe("issue 25: SGLang's PD launch lines start radixgate and serve through it (docs/disaggregation.md)", () => {
  const lines = launchLines();

  it("the page quotes SGLang's launch lines", () => {
    expect(lines.length).toBeGreaterThanOrEqual(2);
  });

  it.each(lines.map((l) => [l.source, l.argv] as const))(
    "the line of %s, its hosts and ports pointed at simulators",
    async (_source, argv) => {
      const prefill = await startSimWorker({ id: "p", role: "prefill", timeScale: 0 });
      // A decode worker asks the bootstrap port the router sends, or its own default for none.
      const decode = await startSimWorker({
        id: "d",
        role: "decode",
        timeScale: 0,
        defaultBootstrapPort: prefill.bootstrapPort!,
      });
      // The flags as written; only where the workers are and where to listen change.
      const local = argv.map((token, i) => {
        const flag = argv[i - 1];
        if (flag === "--prefill") return prefill.url;
        if (flag === "--decode") return decode.url;
        if (argv[i - 2] === "--prefill" && /^\d+$/.test(token))
          return String(prefill.bootstrapPort);
        if (flag === "--host") return "127.0.0.1";
        if (flag === "--port") return "0";
        return token;
      });
      const withListen = local.includes("--port")
        ? local
        : [...local, "--host", "127.0.0.1", "--port", "0"];
      const { config, warnings } = parse(withListen);
      expect(warnings).toEqual([]);
      expect(config.disaggregation.pdDisaggregation).toBe(true);
      const router = await startRouter(config, { logger: createLogger({ level: "silent" }) });
      try {
        const res = await postJson(`${router.url}/v1/chat/completions`, {
          model: "m",
          messages: [{ role: "user", content: "Hello through the PD router" }],
          max_tokens: 3,
        });
        expect(res.status).toBe(200);
        expect(res.headers.get("x-sim-worker-id")).toBe("d");
        const stream = await postJson(`${router.url}/generate`, {
          text: "Hello again",
          sampling_params: { max_new_tokens: 3 },
          stream: true,
        });
        expect(stream.status).toBe(200);
        expect(events(await stream.text()).at(-1)).toBe("[DONE]");
        expect(prefill.stats().requests).toBe(2);
        expect(decode.stats().requests).toBe(2);
      } finally {
        await router.stop(100);
        await Promise.all([prefill.close(), decode.close()]);
      }
    },
  );
});
