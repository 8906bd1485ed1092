import { describe, expect, it } from "vitest";
import {
  DEFAULT_TENANT,
  identify,
  keyTenant,
  priorityOf,
  TenantTable,
} from "../../src/admission/identity.js";

const OPTIONS = { tenantHeader: "x-tenant-id", priorityHeader: "x-priority" };

describe("identify: tenant and priority", () => {
  it("takes the tenant from the tenant header, else the API key's id, else default", () => {
    const table = new TenantTable(10);
    expect(identify({ "x-tenant-id": "acme" }, OPTIONS, table).tenant).toBe("acme");
    const byKey = identify({ authorization: "Bearer sk-secret-123" }, OPTIONS, table).tenant;
    expect(byKey).toBe(keyTenant("sk-secret-123"));
    expect(byKey).toMatch(/^key-[0-9a-f]{12}$/);
    expect(byKey).not.toContain("secret");
    expect(identify({}, OPTIONS, table).tenant).toBe(DEFAULT_TENANT);
    // The header wins over the key.
    expect(
      identify({ "x-tenant-id": "acme", authorization: "Bearer k" }, OPTIONS, table).tenant,
    ).toBe("acme");
  });

  it("counts overlong, empty or label-unsafe tenant names as default", () => {
    const table = new TenantTable(10);
    for (const bad of ["x".repeat(65), "has space", 'quo"te', "new\nline", "-leading"]) {
      expect(identify({ "x-tenant-id": bad }, OPTIONS, table).tenant, bad).toBe(DEFAULT_TENANT);
    }
    expect(table.size).toBe(0);
  });

  it("tracks at most --max-tenants names; a new one beyond is default until an idle one is forgotten", () => {
    let now = 0;
    const table = new TenantTable(2, () => now);
    const forgotten: string[] = [];
    table.onForget((t) => forgotten.push(t));
    expect(table.admit("a")).toBe("a");
    expect(table.admit("b")).toBe("b");
    expect(table.admit("c")).toBe(DEFAULT_TENANT);
    expect(table.admit("a")).toBe("a");
    now = 61_000;
    expect(table.admit("a")).toBe("a");
    // b is the least recently seen and idle for over a minute: c takes its place.
    expect(table.admit("c")).toBe("c");
    expect(forgotten).toEqual(["b"]);
    expect(table.size).toBe(2);
    // Ten thousand distinct names never grow the table.
    for (let i = 0; i < 10_000; i++) table.admit(`t${i}`);
    expect(table.size).toBe(2);
  });

  it("reads the priority as an integer in [-100, 100], anything else as 0", () => {
    expect(priorityOf("5")).toBe(5);
    expect(priorityOf(" -3 ")).toBe(-3);
    expect(priorityOf("+100")).toBe(100);
    for (const bad of [undefined, "", "high", "1.5", "101", "-101", "1e2", "99999", ["1"]]) {
      expect(priorityOf(bad as string | undefined), String(bad)).toBe(0);
    }
  });
});
