import { fileURLToPath } from "node:url";
import { defineConfig, type Plugin } from "vitest/config";

const FAST_CHECK = fileURLToPath(new URL("test/helpers/fast-check.ts", import.meta.url));

/** Test files get fast-check through test/helpers/fast-check.ts, which fixes its seed. */
function fastCheckSeed(): Plugin {
  return {
    name: "radixgate-fast-check-seed",
    enforce: "pre",
    resolveId(id, importer) {
      if (id === "fast-check" && importer !== undefined && importer !== FAST_CHECK)
        return FAST_CHECK;
      return null;
    },
  };
}

/**
 * Most test files share their worker processes and the modules loaded in them (isolate: false):
 * a fresh process per file, loading the router's modules again each time, cost about three
 * quarters of the suite's CPU time. test/helpers/file-boundary.ts puts back timers and
 * process.env after each file; a file that changes other process-wide state, or measures the
 * process itself, gets a process of its own (ISOLATED), as does every file in ALONE.
 */
const ISOLATED = [
  // The global tracer provider; module mocks (vi.mock).
  "test/tracing/**/*.test.ts",
  "test/routes/auth.test.ts",
  // The process's own heap and RSS measured.
  "test/workers/bounded-memory.test.ts",
  // This process made a node:cluster primary (cluster.setupPrimary).
  "test/state/replication-transports.test.ts",
];

/**
 * Files that run after all the others, one at a time, with the machine to themselves:
 * - kv-events-flood drives a router, a flood publisher and its probes as three processes and holds
 *   the router's /health p99 to a margin; another file beside it takes the cores it measures on.
 * - packaging builds into this checkout's dist/ (npm run build, npm pack's prepack) and starts
 *   what it built: two of them side by side would write dist/ while the other reads it.
 */
const ALONE = ["test/faults/kv-events-flood.test.ts", "test/packaging/**/*.test.ts"];

/**
 * One worker, vitest's own default on a 2-core machine. Two were measured too (both with modules
 * shared): no faster on a loaded machine, where the files that start router processes then ran
 * past their timeouts. RADIXGATE_TEST_WORKERS=2 tries two.
 */
const WORKERS = Number(process.env.RADIXGATE_TEST_WORKERS ?? 1);

export default defineConfig({
  plugins: [fastCheckSeed()],
  test: {
    environment: "node",
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: "forks",
    setupFiles: ["test/helpers/file-boundary.ts"],
    projects: [
      {
        extends: true,
        test: {
          name: "shared",
          include: ["test/**/*.test.ts"],
          exclude: [...ISOLATED, ...ALONE],
          isolate: false,
          maxWorkers: WORKERS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "isolated",
          include: ISOLATED,
          maxWorkers: WORKERS,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "alone",
          include: ALONE,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
