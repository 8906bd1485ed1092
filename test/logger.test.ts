import { describe, expect, it } from "vitest";
import { captureLogs } from "./helpers/log-capture.js";

describe("logger redaction", () => {
  it("never writes the state secret, however a caller passes it (config, options, a bare field)", () => {
    const { logger, lines } = captureLogs("info");
    const secret = "state-secret-0123456789abcdef";
    logger.info({ config: { stateSecret: secret, stateUrl: "redis://127.0.0.1:6379" } }, "config");
    logger.info({ options: { secret, keyPrefix: "radixgate" } }, "shared state");
    logger.info({ stateSecret: secret, secret }, "bare");
    expect(lines).toHaveLength(3);
    expect(lines.join("\n")).not.toContain(secret);
    expect(lines.join("\n")).toContain("redis://127.0.0.1:6379");
  });
});
