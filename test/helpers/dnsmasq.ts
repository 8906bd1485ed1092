import { type ChildProcess, spawn } from "node:child_process";
import { promises as dns } from "node:dns";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { freePort } from "../../sim/free-port.js";
import { killChild } from "./kill-child.js";
import { waitFor } from "./router.js";

/**
 * A real dnsmasq for the --worker-dns tests: on a free 127.0.0.1 port, authoritative for
 * `discovery.test` (no upstream server: nothing it is asked leaves the machine), its A/AAAA
 * records from a hosts file the test rewrites (SIGHUP re-reads it), SRV records fixed at start.
 *
 * Outside CI, tests skip when dnsmasq is not installed; under CI (CI=true) they run and fail, so a
 * CI machine without it cannot pass by skipping them (.ci/run installs it).
 */
export const DNSMASQ_BINARY = findDnsmasq();

export const dnsmasqSkipReason: string | undefined =
  DNSMASQ_BINARY === undefined && process.env.CI !== "true"
    ? "dnsmasq is not installed (Debian/Ubuntu: apt-get install -y dnsmasq); the --worker-dns tests need a real DNS server"
    : undefined;

export const TEST_DOMAIN = "discovery.test";
/** A record the helper changes with every hosts file, to know when dnsmasq has read it. */
const GENERATION_NAME = `generation.${TEST_DOMAIN}`;

export interface SrvRecord {
  name: string;
  target: string;
  port: number;
}

export interface TestDnsmasq {
  readonly port: number;
  /** A resolver that asks this server only. */
  resolver(): dns.Resolver;
  /** Replaces the hosts file ("ADDRESS NAME" lines) and waits until dnsmasq answers from it. */
  setHosts(lines: string[]): Promise<void>;
  /** Kills the server: lookups fail from now on. */
  kill(): Promise<void>;
  stop(): Promise<void>;
}

function findDnsmasq(): string | undefined {
  const dirs = [
    ...(process.env.PATH ?? "").split(delimiter),
    "/usr/sbin",
    "/usr/local/sbin",
    "/sbin",
  ];
  for (const dir of dirs) {
    if (dir !== "" && existsSync(join(dir, "dnsmasq"))) return join(dir, "dnsmasq");
  }
  return undefined;
}

export async function startDnsmasq(srv: SrvRecord[] = []): Promise<TestDnsmasq> {
  const binary = DNSMASQ_BINARY;
  if (binary === undefined) {
    throw new Error(
      "dnsmasq is not installed: apt-get install -y dnsmasq (.ci/run installs it under CI)",
    );
  }
  const dir = await mkdtemp(join(tmpdir(), "radixgate-dnsmasq-"));
  // dnsmasq started as root reads the hosts file as nobody after a SIGHUP.
  await chmod(dir, 0o755);
  const hosts = join(dir, "hosts");
  let generation = 0;
  const write = async (lines: string[]) => {
    generation += 1;
    const tmp = `${hosts}.tmp`;
    const sentinel = `10.255.${Math.floor(generation / 250)}.${(generation % 250) + 1}`;
    await writeFile(tmp, [...lines, `${sentinel} ${GENERATION_NAME}`, ""].join("\n"), {
      mode: 0o644,
    });
    await rename(tmp, hosts);
    return sentinel;
  };
  let sentinel = await write([]);
  const port = await freePort();
  const args = [
    "--keep-in-foreground",
    "--conf-file=/dev/null",
    "--no-resolv",
    "--no-hosts",
    "--no-poll",
    `--addn-hosts=${hosts}`,
    "--listen-address=127.0.0.1",
    "--bind-interfaces",
    `--port=${port}`,
    "--pid-file=",
    `--local=/${TEST_DOMAIN}/`,
    "--local-ttl=0",
    "--log-facility=-",
    ...srv.map((r) => `--srv-host=${r.name},${r.target},${r.port}`),
  ];
  let stderr = "";
  let child: ChildProcess | undefined = spawn(binary, args, {
    stdio: ["ignore", "ignore", "pipe"],
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000);
  });
  const resolver = () => {
    const r = new dns.Resolver({ timeout: 500, tries: 1 });
    r.setServers([`127.0.0.1:${port}`]);
    return r;
  };
  const answers = async (expected: string) => {
    try {
      return (await resolver().resolve4(GENERATION_NAME)).includes(expected);
    } catch {
      return false;
    }
  };
  try {
    await waitFor(
      () => answers(sentinel),
      10_000,
      () => `dnsmasq to answer (stderr: ${stderr})`,
    );
  } catch (err) {
    child.kill("SIGKILL");
    throw err;
  }
  const kill = async () => {
    const c = child;
    child = undefined;
    await killChild(c);
  };
  return {
    port,
    resolver,
    async setHosts(lines) {
      sentinel = await write(lines);
      child?.kill("SIGHUP");
      await waitFor(() => answers(sentinel), 10_000, "dnsmasq to re-read its hosts file");
    },
    kill,
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
