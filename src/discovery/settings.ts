/**
 * Where the workers come from: --worker-urls at start, --worker-file and --worker-dns watched
 * (discovery/setup.ts takes DiscoveryConfig as its options).
 */
import { type Parser, SEC, seconds, text } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { workerUrls } from "../workers/settings.js";

export interface DiscoveryConfig {
  /** --worker-urls, normalized; registered at start (command-line-workers.ts). */
  workerUrls: string[];
  /** --worker-file: a JSON or YAML list of workers, watched ("" = none). */
  workerFile: string;
  /** --worker-dns: NAME[:PORT] whose A/AAAA (or SRV) records are the workers ("" = none). */
  workerDns: string;
  dnsIntervalMs: number;
  dnsTimeoutMs: number;
  /** --discovery-grace-secs: how long a worker that left a source drains before removal. */
  graceMs: number;
}

/** NAME[:PORT] for --worker-dns: a DNS name, and the workers' port unless SRV records give it. */
const dnsTarget: Parser<string> = (raw, flag) => {
  const value = raw.trim();
  if (value === "") return "";
  const match =
    /^([A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9])?)*\.?(:(\d{1,5}))?$/.exec(
      value,
    );
  const port = match?.[6] === undefined ? undefined : Number(match[6]);
  if (match === null || value.length > 260 || (port !== undefined && (port < 1 || port > 65535))) {
    throw new ConfigError(
      flag,
      `must be a DNS name with an optional port, e.g. workers.llm.svc.cluster.local:30000, got "${raw}"`,
    );
  }
  return value;
};

export const DISCOVERY_SETTINGS = section<DiscoveryConfig>(
  {
    workerUrls: {
      flag: "--worker-urls",
      arg: "<url...>",
      description:
        "Worker base URLs (space- or comma-separated). May be empty: add workers later through the admin API.",
      default: [],
      parse: workerUrls,
    },
    workerFile: {
      flag: "--worker-file",
      arg: "<path>",
      description:
        "A JSON or YAML list of workers (URLs, or objects with the fields of POST /workers), watched: added entries join after a health check, removed ones drain. A bad file is logged and ignored; the last good one stands. Empty = none. See docs/discovery.md.",
      default: "",
      parse: text,
    },
    workerDns: {
      flag: "--worker-dns",
      arg: "<name[:port]>",
      description:
        "A DNS name whose A/AAAA records are the workers (http://ADDRESS:PORT), or whose SRV records give targets and ports; re-resolved every --dns-interval-secs. A failed lookup keeps the last answer. Empty = none. See docs/discovery.md.",
      default: "",
      parse: dnsTarget,
    },
    dnsIntervalMs: {
      flag: "--dns-interval-secs",
      arg: "<secs>",
      description: "With --worker-dns: seconds between lookups.",
      default: 30 * SEC,
      parse: seconds(0, 86_400, { minExclusive: true }),
    },
    dnsTimeoutMs: {
      flag: "--dns-timeout-secs",
      arg: "<secs>",
      description: "With --worker-dns: limit for one lookup; past it the last answer stands.",
      default: 5 * SEC,
      parse: seconds(0, 600, { minExclusive: true }),
    },
    graceMs: {
      flag: "--discovery-grace-secs",
      arg: "<secs>",
      description:
        "A worker that leaves --worker-file or --worker-dns drains (no new requests, in-flight ones complete) and is removed after this long; back within it, it keeps its prefix tree (0 = remove at once).",
      default: 30 * SEC,
      parse: seconds(0),
    },
  },
  (s) => {
    if (new Set(s.workerUrls).size !== s.workerUrls.length) {
      throw new ConfigError("--worker-urls", "lists the same worker twice");
    }
  },
);
