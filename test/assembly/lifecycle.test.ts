import { describe, expect, it } from "vitest";
import { Lifecycle } from "../../src/assembly/lifecycle.js";
import { createLogger } from "../../src/logger.js";

const silent = createLogger({ level: "silent" });

describe("Lifecycle", () => {
  it("stops the services it started in reverse order", async () => {
    const seen: string[] = [];
    const services = new Lifecycle(silent);
    for (const name of ["a", "b", "c"])
      await services.start({
        name,
        start: () => seen.push(`start ${name}`),
        stop: () => seen.push(`stop ${name}`),
      });
    await services.stop();
    expect(seen).toEqual(["start a", "start b", "start c", "stop c", "stop b", "stop a"]);
    expect(services.names).toEqual([]);
  });

  it("a start that fails stops the ones before it, newest first, and rethrows; its own stop is not called", async () => {
    const seen: string[] = [];
    const services = new Lifecycle(silent);
    await services.start({ name: "a", stop: () => seen.push("stop a") });
    await services.start({ name: "b", stop: async () => void seen.push("stop b") });
    await expect(
      services.start({
        name: "c",
        start: async () => {
          throw new Error("port in use");
        },
        stop: () => seen.push("stop c"),
      }),
    ).rejects.toThrow("port in use");
    expect(seen).toEqual(["stop b", "stop a"]);
    await expect(services.start({ name: "d", stop: () => {} })).rejects.toThrow(/stopping/);
  });

  it("a stop that throws is logged and the others still stop; stop runs once", async () => {
    const seen: string[] = [];
    const services = new Lifecycle(silent);
    await services.start({ name: "a", stop: () => seen.push("stop a") });
    await services.start({
      name: "b",
      stop: () => {
        throw new Error("boom");
      },
    });
    await Promise.all([services.stop(), services.stop()]);
    expect(seen).toEqual(["stop a"]);
  });

  it("beforeStart fails the named step like its own start would", async () => {
    const seen: string[] = [];
    const services = new Lifecycle(silent, (name) => {
      if (name === "b") throw new Error("injected");
    });
    await services.start({ name: "a", stop: () => seen.push("stop a") });
    await expect(
      services.start({ name: "b", start: () => seen.push("start b"), stop: () => {} }),
    ).rejects.toThrow("injected");
    expect(seen).toEqual(["stop a"]);
  });
});
