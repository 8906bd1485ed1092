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

export default defineConfig({
  plugins: [fastCheckSeed()],
  test: {
    include: ["test/**/*.test.ts"],
    environment: "node",
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: "forks",
  },
});
