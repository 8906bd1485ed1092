// `npm start` runs the built router (dist/); before `npm run build` it would die with a raw
// module-not-found stack. Say what to do instead.
import { existsSync } from "node:fs";

if (!existsSync(new URL("../dist/cli.js", import.meta.url))) {
  console.error(
    "radixgate: dist/cli.js is missing. Run `npm run build` once, then `npm start`; or run from source with `npx tsx src/cli.ts`.",
  );
  process.exit(1);
}
