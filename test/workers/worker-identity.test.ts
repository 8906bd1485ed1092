/**
 * Issue 19 item 5: one worker is registered once whatever the spelling (host case, loopback
 * names, IPv4-mapped forms, a trailing /v1, a host name that resolves to a registered address),
 * and every spelling of a link-local address is refused.
 */
import fc from "fast-check";
import { afterEach, describe, expect, it } from "vitest";
import { startSimWorker } from "../../sim/worker.js";
import { configWith } from "../../src/config.js";
import { RouterError } from "../../src/errors.js";
import { createLogger } from "../../src/logger.js";
import { startRouter } from "../../src/server.js";
import { systemResolver } from "../../src/workers/host-lookup.js";
import { isLinkLocalIp } from "../../src/workers/ip-address.js";
import { type AdmissionRules, WorkerRegistry } from "../../src/workers/registry.js";
import {
  linkLocalReason,
  normalizeWorkerUrl,
  workerIdentity,
} from "../../src/workers/worker-url.js";
import { postJson, startTestRouter } from "../helpers/router.js";

function registry(rules: AdmissionRules = {}): WorkerRegistry {
  return new WorkerRegistry(
    {
      breaker: { failureThreshold: 5, openMs: 1000, successThreshold: 2 },
      connectTimeoutMs: 1000,
    },
    rules,
  );
}

async function codeOf(fn: () => unknown): Promise<string | undefined> {
  try {
    await fn();
  } catch (err) {
    return err instanceof RouterError ? err.code : String(err);
  }
  return undefined;
}

const identity = (url: string) => workerIdentity(normalizeWorkerUrl(url));

// --- spellings, for the property tests -------------------------------------------------------

const octets = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255));
type Octets = [number, number, number, number];
const hex4 = (hi: number, lo: number) => ((hi << 8) | lo).toString(16);
const randomCase = (text: string, flips: boolean[]) =>
  [...text].map((ch, i) => (flips[i % flips.length] ? ch.toUpperCase() : ch)).join("");

/** Every way a URL host can name this IPv4 address (all reach it, through a stack or NAT64). */
function ipv4Spellings([a, b, c, d]: Octets): string[] {
  const dotted = `${a}.${b}.${c}.${d}`;
  const hi = hex4(a, b);
  const lo = hex4(c, d);
  const n = ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
  return [
    dotted,
    `${dotted}.`,
    String(n),
    `0x${n.toString(16)}`,
    [a, b, c, d].map((o) => `0${o.toString(8)}`).join("."),
    `[::ffff:${dotted}]`,
    `[::ffff:${hi}:${lo}]`,
    `[0:0:0:0:0:ffff:${hi}:${lo}]`,
    `[::${dotted}]`,
    `[::${hi}:${lo}]`,
    `[::ffff:0:${hi}:${lo}]`,
    `[64:ff9b::${dotted}]`,
    `[64:ff9b::${hi}:${lo}]`,
    // The local-use NAT64 prefix at /48: IPv4 in bytes 6, 7, 9, 10 (byte 8 is zero).
    `[64:ff9b:1:${hi}:${c.toString(16)}:${(d << 8).toString(16)}::]`,
    `[2002:${hi}:${lo}::1]`,
    `[2001:0:${hi}:${lo}::1]`,
    `[2001:0:1:1::${hex4(a ^ 255, b ^ 255)}:${hex4(c ^ 255, d ^ 255)}]`,
  ];
}

describe("worker identity (issue 19 item 5)", () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(cleanup.splice(0).map((f) => f()));
  });

  it("POST /workers answers 400 for localhost, LOCALHOST, ::ffff:127.0.0.1 and /v1 spellings of a registered 127.0.0.1 worker", async () => {
    const sim = await startSimWorker({ id: "one", timeScale: 0 });
    const router = await startTestRouter();
    cleanup.push(async () => {
      await router.stop(100);
      await sim.close();
    });
    const port = new URL(sim.url).port;
    const first = await postJson(`${router.url}/workers`, { url: `http://127.0.0.1:${port}` });
    expect(first.status).toBe(202);
    await first.arrayBuffer();
    for (const spelling of [
      `http://localhost:${port}/v1`,
      `http://LOCALHOST:${port}`,
      `http://localhost.:${port}/`,
      `http://gpu.localhost:${port}`,
      `http://[::ffff:127.0.0.1]:${port}/v1/`,
      `http://2130706433:${port}`,
      `http://127.1:${port}`,
    ]) {
      const res = await postJson(`${router.url}/workers`, { url: spelling });
      const body = (await res.json()) as { error?: { code: string; message: string } };
      expect(res.status, spelling).toBe(400);
      expect(body.error?.code, spelling).toBe("worker_exists");
    }
    expect(router.context.registry.size).toBe(1);
    // Any spelling finds it again (GET, DELETE by URL).
    expect(router.context.registry.get(`http://localhost:${port}/v1`)?.url).toBe(
      `http://127.0.0.1:${port}`,
    );
  });

  it("a host name that resolves to a registered worker's address is the same worker (both orders)", async () => {
    const resolveHost = async (name: string) => (name === "gpu1" ? ["10.0.0.5"] : []);
    const byAddressFirst = registry({ resolveHost });
    byAddressFirst.add("http://10.0.0.5:8000");
    expect(await codeOf(() => byAddressFirst.addResolved("http://GPU1:8000/v1"))).toBe(
      "worker_exists",
    );
    const byNameFirst = registry({ resolveHost });
    await byNameFirst.addResolved("http://gpu1:8000");
    expect(await codeOf(() => byNameFirst.addResolved("http://[::ffff:10.0.0.5]:8000"))).toBe(
      "worker_exists",
    );
    // Another port or base path is another server.
    expect(await codeOf(() => byNameFirst.addResolved("http://10.0.0.5:8001"))).toBeUndefined();
    expect(byNameFirst.size).toBe(2);
    // Removing frees every key it held.
    byNameFirst.remove("http://gpu1:8000");
    expect(await codeOf(() => byNameFirst.addResolved("http://10.0.0.5:8000"))).toBeUndefined();
  });

  it("a host name resolving to a loopback address is the loopback worker; a name resolving to link-local is refused", async () => {
    const resolveHost = async (name: string) =>
      name === "me" ? ["127.0.0.1"] : name === "evil" ? ["10.0.0.1", "169.254.169.254"] : [];
    const r = registry({ resolveHost });
    r.add("http://localhost:9000");
    expect(await codeOf(() => r.addResolved("http://me:9000"))).toBe("worker_exists");
    expect(await codeOf(() => r.addResolved("http://evil:9000"))).toBe("invalid_worker_url");
    const allowed = registry({ resolveHost, allowLinkLocal: true });
    expect(await codeOf(() => allowed.addResolved("http://evil:9000"))).toBeUndefined();
  });

  it("--worker-urls: names are resolved together at start-up (one lookup's wait, not one per worker), and a name for a listed address is refused", async () => {
    const base = configWith({
      host: "127.0.0.1",
      port: 0,
      logLevel: "silent" as const,
      healthCheckIntervalSecs: 0,
      enginePollIntervalSecs: 0,
    });
    const logger = createLogger({ level: "silent" });
    let started = 0;
    let active = 0;
    let most = 0;
    let release = () => {};
    const everyoneAsked = new Promise<void>((resolve) => {
      release = resolve;
    });
    const resolveHost = async (name: string) => {
      started += 1;
      active += 1;
      most = Math.max(most, active);
      if (started === 3) release();
      // Sequential lookups would never get here together: the bound keeps that case finite.
      await Promise.race([everyoneAsked, new Promise((r) => setTimeout(r, 2000))]);
      active -= 1;
      return name === "gpu2" ? ["10.0.0.5"] : [`10.0.1.${name.slice(3)}`];
    };
    const router = await startRouter(
      configWith(
        { workerUrls: ["http://gpu1:8000", "http://gpu2:8000", "http://gpu3:8000"] },
        base,
      ),
      { logger, resolveHost },
    );
    cleanup.push(() => router.stop(100));
    expect(most).toBe(3);
    expect(router.context.registry.list().map((w) => w.url)).toEqual([
      "http://gpu1:8000",
      "http://gpu2:8000",
      "http://gpu3:8000",
    ]);
    await expect(
      startRouter(configWith({ workerUrls: ["http://10.0.0.5:8000", "http://gpu2:8000"] }, base), {
        logger,
        resolveHost: async () => ["10.0.0.5"],
      }),
    ).rejects.toThrow(/--worker-urls.*already registered as http:\/\/10\.0\.0\.5:8000/);
  });

  it("the system resolver answers localhost with loopback addresses and a bad name with nothing", async () => {
    const resolve = systemResolver(2000);
    const local = await resolve("localhost");
    expect(local.length).toBeGreaterThan(0);
    expect(await resolve("no-such-host.invalid")).toEqual([]);
  });

  it.each([
    "http://[::169.254.169.254]",
    "http://[::a9fe:a9fe]:8000",
    "http://[64:ff9b::a9fe:a9fe]",
    "http://[64:ff9b::169.254.169.254]",
    "http://[::ffff:0:a9fe:a9fe]",
    "http://[2002:a9fe:a9fe::1]",
    "http://[64:ff9b:1:a9fe:a9:fe00::]",
    "http://[2001:0:102:304::5601:5601]",
    "http://0xa9fea9fe",
    "http://2852039166",
    "http://0251.0376.0251.0376",
    "http://169.254.43518",
    "http://[FE80::1]",
  ])("refuses the link-local spelling %s", async (url) => {
    expect(await codeOf(() => registry().add(url))).toBe("invalid_worker_url");
    expect(await codeOf(() => registry({ allowLinkLocal: true }).add(url))).toBeUndefined();
  });

  it("property: every spelling of a link-local IPv4 address is refused", () => {
    const linkLocal = fc.tuple(fc.constant(169), fc.constant(254), fc.nat(255), fc.nat(255));
    fc.assert(
      fc.property(linkLocal, fc.integer({ min: 1, max: 65535 }), (ip, port) => {
        for (const host of ipv4Spellings(ip as Octets)) {
          const url = normalizeWorkerUrl(`http://${host}:${port}`);
          expect(linkLocalReason(url), host).toBeDefined();
        }
      }),
    );
  });

  it("property: an address outside the link-local and metadata ranges is never refused, in any spelling", () => {
    const ordinary = octets.filter(
      ([a, b, c, d]) => !(a === 169 && b === 254) && `${a}.${b}.${c}.${d}` !== "100.100.100.200",
    );
    fc.assert(
      fc.property(ordinary, (ip) => {
        // The local-use NAT64 prefix is read at every prefix length, so it may be refused.
        for (const host of ipv4Spellings(ip as Octets).filter((h) => !h.includes(":ff9b:1:"))) {
          const url = normalizeWorkerUrl(`http://${host}:8000`);
          expect(linkLocalReason(url), host).toBeUndefined();
        }
      }),
    );
  });

  it("property: the spellings of one IPv4 worker that reach the same host share one identity", () => {
    fc.assert(
      fc.property(octets, fc.integer({ min: 1, max: 65535 }), (ip, port) => {
        const [a, b, c, d] = ip;
        const dotted = `${a}.${b}.${c}.${d}`;
        const want = identity(`http://${dotted}:${port}`);
        const n = ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
        for (const host of [
          `${dotted}.`,
          String(n),
          `0x${n.toString(16).toUpperCase()}`,
          `[::ffff:${dotted}]`,
          `[::FFFF:${hex4(a, b)}:${hex4(c, d)}]`,
        ]) {
          for (const tail of ["", "/", "/v1", "/V1/", "//v1//"]) {
            expect(identity(`http://${host}:${port}${tail}`), `${host}${tail}`).toBe(want);
          }
        }
      }),
    );
  });

  it("property: every spelling of 127.0.0.1, in any case, with or without /v1, is one worker per port", () => {
    // Spellings that reach the same socket; other loopback addresses are other sockets (below).
    const loopback = fc.oneof(
      fc.constant("localhost"),
      fc.constant("localhost."),
      fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/).map((label) => `${label}.localhost`),
      fc.constant("127.1"),
      fc.constant("127.0.0.1"),
      fc.constant("2130706433"),
      fc.constant("[::ffff:127.0.0.1]"),
      fc.constant("[::ffff:7f00:1]"),
    );
    fc.assert(
      fc.property(
        loopback,
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        fc.integer({ min: 1, max: 65535 }),
        fc.constantFrom("", "/", "/v1", "/V1/"),
        (host, flips, port, tail) => {
          const url = `http://${randomCase(host, flips)}:${port}${tail}`;
          expect(identity(url)).toBe(identity(`http://127.0.0.1:${port}`));
          expect(identity(url)).not.toBe(identity(`http://127.0.0.1:${(port % 65535) + 1}`));
          expect(linkLocalReason(normalizeWorkerUrl(url))).toBeUndefined();
        },
      ),
    );
  });

  it("property: distinct loopback addresses are distinct workers (127.0.0.2 and ::1 beside 127.0.0.1)", () => {
    const other = fc.oneof(
      fc
        .tuple(fc.nat(255), fc.nat(255), fc.integer({ min: 2, max: 255 }))
        .map(([b, c, d]) => `127.${b}.${c}.${d}`),
      fc.constant("[::1]"),
      fc.constant("[0:0:0:0:0:0:0:1]"),
    );
    fc.assert(
      fc.property(other, fc.integer({ min: 1, max: 65535 }), (host, port) => {
        expect(identity(`http://${host}:${port}`)).not.toBe(identity(`http://127.0.0.1:${port}`));
        expect(identity(`http://${host}:${port}/v1`)).toBe(identity(`http://${host}:${port}`));
      }),
    );
  });

  it("two engines on 127.0.0.1:P and 127.0.0.2:P are both registered", async () => {
    const one = await startSimWorker({ id: "one", timeScale: 0, host: "127.0.0.1" });
    const port = Number(new URL(one.url).port);
    const two = await startSimWorker({ id: "two", timeScale: 0, host: "127.0.0.2", port });
    const router = await startTestRouter({ workerUrls: [one.url], policy: "round_robin" });
    cleanup.push(async () => {
      await router.stop(100);
      await Promise.all([one.close(), two.close()]);
    });
    const res = await postJson(`${router.url}/workers`, { url: `http://127.0.0.2:${port}` });
    expect(res.status).toBe(202);
    await res.arrayBuffer();
    expect(router.context.registry.size).toBe(2);
    // Each URL reaches its own engine.
    const seen = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const answer = await postJson(`${router.url}/v1/completions`, {
        prompt: `p${i}`,
        max_tokens: 1,
      });
      seen.add(answer.headers.get("x-sim-worker-id"));
      await answer.arrayBuffer();
    }
    expect(seen).toEqual(new Set(["one", "two"]));
  });

  it("property: host names compare case-insensitively and keep their base path", () => {
    const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/);
    fc.assert(
      fc.property(
        fc.array(label, { minLength: 1, maxLength: 3 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }),
        fc.constantFrom("", "/sglang", "/a/b"),
        (labels, flips, base) => {
          const host = labels.join(".");
          fc.pre(host !== "localhost" && !host.endsWith(".localhost"));
          // "xn--" opens a punycode label, which the URL parser decodes (or refuses) on its own.
          fc.pre(!labels.some((l) => l.startsWith("xn--")));
          const want = identity(`http://${host}:8000${base}`);
          expect(identity(`http://${randomCase(host, flips)}.:8000${base}/v1/`)).toBe(want);
          expect(identity(`http://${host}:8000${base}/other`)).not.toBe(want);
        },
      ),
    );
  });

  it("isLinkLocalIp reads the IPv4 inside every IPv6 embedding, and not inside ordinary addresses", () => {
    for (const ip of ["::a9fe:a9fe", "64:ff9b::169.254.0.1", "2002:a9fe:1::", "fe80::1%eth0"]) {
      expect(isLinkLocalIp(ip), ip).toBe(true);
    }
    for (const ip of ["2001:db8::a9fe:a9fe", "fd00::a9fe:a9fe", "::1", "::", "2606:4700::1111"]) {
      expect(isLinkLocalIp(ip), ip).toBe(false);
    }
  });
});
