import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runCli, stderrLines } from "../helpers/cli.js";

describe("--scheduler-config on the command line", () => {
  it("exits 2 with one line naming the flag, the file and the path in it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "radixgate-sched-"));
    const file = join(dir, "scheduler.yaml");
    writeFileSync(
      file,
      [
        "plugins:",
        "- type: prefix-cache-scorer",
        "- type: queue-scorer",
        "- type: kv-cache-utilization-scorer",
        "schedulingProfiles:",
        "- name: default",
        "  plugins:",
        "  - pluginRef: prefix-cache-scorer",
        "  - pluginRef: queue-scorer",
        "  - pluginRef: kv-cache-utilization-scorer",
        "    weight: -1",
        "",
      ].join("\n"),
    );
    const { code, stderr } = await runCli(["--scheduler-config", file]).done;
    expect(code).toBe(2);
    const lines = stderrLines(stderr);
    expect(lines).toEqual([
      `radixgate: error: --scheduler-config ${file}: schedulingProfiles[0].plugins[2].weight: must be ≥ 0, got -1`,
    ]);
  });
});
