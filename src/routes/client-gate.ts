import { RouterError } from "../errors.js";
import type { RouterContext } from "./context.js";

/**
 * The gate every client request passes before the router does any work for it: refused while the
 * router shuts down (the client should go to another replica), and without the router's API key
 * when one is set (--api-key).
 */
export function admitClient(
  ctx: Pick<RouterContext, "config" | "state">,
  authorization: string | undefined,
): void {
  if (ctx.state.shuttingDown) throw new RouterError("shutting_down");
  const key = ctx.config.apiKey;
  if (key !== undefined && !key.matches(authorization)) {
    throw new RouterError(
      "unauthorized",
      "Missing or invalid API key: send Authorization: Bearer <key>.",
    );
  }
}
