import { njsModulePath } from "../../src/nginx/supervisor.js";

/**
 * Whether nginx and its njs module are installed. Without them the --data-plane nginx tests skip,
 * except under CI, where .ci/run installs them and a missing one must fail the run.
 */
export function nginxWithNjs(): boolean {
  try {
    njsModulePath("nginx");
    return true;
  } catch (err) {
    if (process.env.CI === "true")
      throw new Error(`CI=true but nginx with njs is not installed: ${(err as Error).message}`);
    return false;
  }
}
