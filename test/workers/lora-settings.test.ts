import { mkdtempSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config.js";
import { ConfigError } from "../../src/errors.js";
import { loraPathMap } from "../../src/workers/settings.js";

describe("--lora-paths and --lora-load-on-demand", () => {
  it("reads name=path entries and a file of them; the flag's entries win", () => {
    const dir = mkdtempSync(join(os.tmpdir(), "lora-paths-"));
    const lines = join(dir, "loras.txt");
    writeFileSync(lines, "# adapters\nsql=/loras/sql-v1\n\nchat=/loras/chat\n");
    const json = join(dir, "loras.json");
    writeFileSync(json, JSON.stringify({ code: "org/code-lora" }));
    const config = parseConfig({
      loraLoadOnDemand: "true",
      loraPaths: "sql=/loras/sql-v2, math=/loras/math",
      loraPathsFile: lines,
    });
    expect([...loraPathMap(config.lora)]).toEqual([
      ["sql", "/loras/sql-v2"],
      ["chat", "/loras/chat"],
      ["math", "/loras/math"],
    ]);
    const fromJson = parseConfig({ loraPathsFile: json });
    expect([...loraPathMap(fromJson.lora)]).toEqual([["code", "org/code-lora"]]);
  });

  it("refuses a bad entry, an unreadable file, and loading on demand with nothing to load", () => {
    expect(() => parseConfig({ loraPaths: "sql" })).toThrow(ConfigError);
    expect(() => parseConfig({ loraPathsFile: "/nonexistent/loras.txt" })).toThrow(/cannot read/);
    expect(() => parseConfig({ loraLoadOnDemand: "true" })).toThrow(/--lora-paths/);
  });
});
