import { BlockList, isIPv4, isIPv6 } from "node:net";

/**
 * What an IP address reaches, whatever its spelling: link-local / cloud metadata (refused as a
 * worker or KV endpoint) and loopback (one host, however it is written). IPv6 addresses that
 * carry an IPv4 address inside them are judged by that IPv4 address too, since a stack or a
 * translator on the path delivers them there.
 */

/** Link-local ranges (where cloud metadata services live) and the metadata addresses outside them. */
const LINK_LOCAL = new BlockList();
LINK_LOCAL.addSubnet("169.254.0.0", 16, "ipv4");
LINK_LOCAL.addSubnet("fe80::", 10, "ipv6");
// AWS IMDS over IPv6, Alibaba Cloud metadata.
LINK_LOCAL.addAddress("fd00:ec2::254", "ipv6");
LINK_LOCAL.addAddress("100.100.100.200", "ipv4");

/** Whether an IP address (v4, v6, or v6 carrying a v4) is link-local or a cloud metadata address. */
export function isLinkLocalIp(address: string): boolean {
  const ip = bareIp(address);
  if (isIPv4(ip)) return LINK_LOCAL.check(ip, "ipv4");
  const groups = ipv6Groups(ip);
  if (groups === undefined) return false;
  if (LINK_LOCAL.check(ip, "ipv6")) return true;
  return embeddedIpv4(groups).some((v4) => LINK_LOCAL.check(v4, "ipv4"));
}

/** Whether an IP address reaches this host: 127.0.0.0/8, ::1, 0.0.0.0, ::, and ::ffff:127.x. */
export function isLoopbackIp(address: string): boolean {
  const ip = bareIp(address);
  if (isIPv4(ip)) return ip.startsWith("127.") || ip === "0.0.0.0";
  const groups = ipv6Groups(ip);
  if (groups === undefined) return false;
  const mapped = mappedIpv4(groups);
  if (mapped !== undefined) return isLoopbackIp(mapped);
  // ::1 and :: (connecting to the unspecified address reaches this host on Linux).
  return groups.slice(0, 7).every((g) => g === 0) && (groups[7] ?? 2) <= 1;
}

/** Loopback host names (RFC 6761: every name under .localhost). */
export function isLoopbackName(hostname: string): boolean {
  const name = hostname.toLowerCase().replace(/\.$/, "");
  return name === "localhost" || name.endsWith(".localhost");
}

/** `::ffff:a.b.c.d` (IPv4-mapped) as `a.b.c.d`, else undefined: the one form that is the same host. */
export function ipv4MappedAddress(address: string): string | undefined {
  const groups = ipv6Groups(bareIp(address));
  return groups === undefined ? undefined : mappedIpv4(groups);
}

/** Without brackets or a zone id, lower-case. */
function bareIp(address: string): string {
  const unbracketed = address.startsWith("[") ? address.slice(1, -1) : address;
  return unbracketed.replace(/%.*$/, "").toLowerCase();
}

/** An IPv6 address as its 8 groups (handles `::` and a dotted IPv4 tail), or undefined. */
export function ipv6Groups(address: string): number[] | undefined {
  if (!isIPv6(address)) return undefined;
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.split("::") as [string, string | undefined];
  const parse = (part: string) =>
    part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16));
  const front = parse(head);
  if (tail === undefined) return front.length === 8 ? front : undefined;
  const back = parse(tail);
  return [...front, ...new Array<number>(8 - front.length - back.length).fill(0), ...back];
}

function v4(hi: number, lo: number): string {
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

function zeros(groups: number[], from: number, to: number): boolean {
  return groups.slice(from, to).every((g) => g === 0);
}

function mappedIpv4(g: number[]): string | undefined {
  return zeros(g, 0, 5) && g[5] === 0xffff ? v4(g[6] ?? 0, g[7] ?? 0) : undefined;
}

/**
 * Every IPv4 address an IPv6 address carries, by the standard embeddings: IPv4-mapped
 * (::ffff:0:0/96), IPv4-compatible (::/96, deprecated but still routed by some stacks),
 * IPv4-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48 at
 * each RFC 6052 prefix length), 6to4 (2002::/16) and Teredo (2001::/32, server and client).
 */
export function embeddedIpv4(g: number[]): string[] {
  const [g0 = 0, g1 = 0, g2 = 0, g3 = 0, g4 = 0, g5 = 0, g6 = 0, g7 = 0] = g;
  const out: string[] = [];
  const last = v4(g6, g7);
  if (zeros(g, 0, 5) && (g5 === 0xffff || g5 === 0)) out.push(last);
  if (zeros(g, 0, 4) && g4 === 0xffff && g5 === 0) out.push(last);
  if (g0 === 0x64 && g1 === 0xff9b && zeros(g, 2, 6)) out.push(last);
  if (g0 === 0x64 && g1 === 0xff9b && g2 === 1) {
    // RFC 6052 §2.2: the IPv4 bits follow a /48, /56, /64 or /96 prefix, skipping bits 64–71.
    const bytes = g.flatMap((x) => [x >> 8, x & 255]);
    for (const start of [6, 7, 9, 12]) {
      const octets = bytes.slice(start, start + 5).filter((_, i) => start + i !== 8);
      out.push(octets.slice(0, 4).join("."));
    }
  }
  if (g0 === 0x2002) out.push(v4(g1, g2));
  if (g0 === 0x2001 && g1 === 0) out.push(v4(g2, g3), v4(g6 ^ 0xffff, g7 ^ 0xffff));
  return out;
}
