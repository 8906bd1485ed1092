import { describe, expect, it } from "vitest";
import { normalizeWorkerUrl, workerIdFor } from "../../src/workers/worker-url.js";

describe("worker URLs", () => {
  it("normalizes spellings of one worker to one URL", () => {
    expect(normalizeWorkerUrl("http://A:30000/")).toBe("http://a:30000");
    expect(normalizeWorkerUrl(" http://a:30000 ")).toBe("http://a:30000");
    expect(normalizeWorkerUrl("https://gpu1.internal/sglang/")).toBe(
      "https://gpu1.internal/sglang",
    );
  });

  it.each(["10.0.0.1:30000", "ftp://a", "http://user:pw@a:1", "http://a:1/?x=1", "", "http://"])(
    "rejects %s",
    (url) => {
      expect(() => normalizeWorkerUrl(url)).toThrow();
    },
  );

  it("never echoes credentials in its error", () => {
    expect(() => normalizeWorkerUrl("http://user:secret@a:1")).toThrow(/^(?!.*secret)/);
  });

  it("gives a stable short id per URL", () => {
    expect(workerIdFor("http://a:1")).toBe(workerIdFor("http://a:1"));
    expect(workerIdFor("http://a:1")).not.toBe(workerIdFor("http://a:2"));
    expect(workerIdFor("http://a:1")).toMatch(/^[0-9a-f]{10}$/);
  });
});
