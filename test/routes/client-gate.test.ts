import { describe, expect, it } from "vitest";
import { routeOptions } from "../../src/assembly/routes.js";
import { configWith } from "../../src/config.js";
import { RouterError } from "../../src/errors.js";
import { admitClient } from "../../src/routes/client-gate.js";

function gate(apiKey: string | undefined, shuttingDown = false) {
  return { config: routeOptions(configWith({ apiKey })), state: { shuttingDown, active: 0 } };
}

function refusal(run: () => void): string | undefined {
  try {
    run();
    return undefined;
  } catch (err) {
    if (err instanceof RouterError) return err.code;
    throw err;
  }
}

describe("admitClient", () => {
  it("admits anyone when no API key is set", () => {
    expect(refusal(() => admitClient(gate(undefined), undefined))).toBeUndefined();
  });

  it("with an API key, admits only its bearer", () => {
    expect(refusal(() => admitClient(gate("k1"), "Bearer k1"))).toBeUndefined();
    expect(refusal(() => admitClient(gate("k1"), "Bearer k2"))).toBe("unauthorized");
    expect(refusal(() => admitClient(gate("k1"), undefined))).toBe("unauthorized");
  });

  it("refuses everyone while shutting down, before looking at the key", () => {
    expect(refusal(() => admitClient(gate(undefined, true), undefined))).toBe("shutting_down");
    expect(refusal(() => admitClient(gate("k1", true), "Bearer nope"))).toBe("shutting_down");
  });
});
