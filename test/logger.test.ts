import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it, vi } from "vitest";
import { createLogger } from "../src/logger.js";
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

describe("log lines on standard output", () => {
  it("writes the lines of one event-loop turn at once, after the turn", async () => {
    const logger = createLogger({ level: "info", json: true });
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    try {
      logger.info("one");
      logger.info("two");
      logger.warn("three");
      expect(write).not.toHaveBeenCalled();
      await new Promise((resolve) => setImmediate(resolve));
      expect(write).toHaveBeenCalledTimes(1);
      const text = String(write.mock.calls[0]?.[0]);
      expect(
        text
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l).msg),
      ).toEqual(["one", "two", "three"]);
    } finally {
      write.mockRestore();
    }
  });

  it("does not hold a burst: 64 KB of lines are written at once, within the turn", async () => {
    const logger = createLogger({ level: "info", json: true });
    const write = vi.spyOn(process.stdout, "write").mockImplementation(() => true);
    try {
      const big = "x".repeat(1024);
      for (let i = 0; i < 80; i++) logger.info({ big }, "line");
      expect(write).toHaveBeenCalledTimes(1);
      await new Promise((resolve) => setImmediate(resolve));
      expect(write).toHaveBeenCalledTimes(2);
      const lines = write.mock.calls
        .map((c) => String(c[0]))
        .join("")
        .split("\n");
      expect(lines.filter((l) => l !== "")).toHaveLength(80);
    } finally {
      write.mockRestore();
    }
  });

  it("writes the lines still held when the process exits", () => {
    const script = [
      'import { createLogger } from "./src/logger.ts";',
      'const logger = createLogger({ level: "info", json: true });',
      'logger.info("before exit");',
      'logger.error("last words");',
      "process.exit(3);",
    ].join("\n");
    const run = spawnSync(
      process.execPath,
      ["--import", "tsx", "--input-type=module", "-e", script],
      {
        cwd: fileURLToPath(new URL("..", import.meta.url)),
        encoding: "utf8",
        timeout: 20_000,
      },
    );
    expect(run.status).toBe(3);
    const msgs = run.stdout
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l).msg);
    expect(msgs).toEqual(["before exit", "last words"]);
  });
});
