/**
 * radixgate's end of nginx's access log: nginx sends one syslog datagram per relayed request
 * (`access_log syslog:server=127.0.0.1:<port>,tag=radixgate,nohostname`, nginx.conf written by
 * config.ts), and each becomes a completion record for the request's attempt. Loopback UDP, not a
 * unix datagram socket: Node's dgram has no AF_UNIX. A datagram lost under pressure leaves its
 * attempt to the expiry of proxy/remote-relay.ts.
 */
import { createSocket, type Socket } from "node:dgram";
import type { CompletionRecord } from "../proxy/remote-relay.js";

/** The log_format's fields read here (config.ts): every value a string, "" or "-" when unset. */
interface LogLine {
  readonly id?: string | undefined;
  readonly s?: string | undefined;
  readonly us?: string | undefined;
  readonly ht?: string | undefined;
  readonly pt?: string | undefined;
  readonly ct?: string | undefined;
  readonly gt?: string | undefined;
}
type MutableLogLine = { -readonly [K in keyof LogLine]: string | undefined };

/**
 * One datagram's record; undefined when it is not one (another sender, a line without a request).
 * `$upstream_status` and `$upstream_header_time` list every upstream tried in the request
 * ("502, 200"): the last is the answer's.
 */
export function parseRecord(datagram: string): CompletionRecord | undefined {
  const start = datagram.indexOf("{");
  if (start === -1) return undefined;
  const line = flatFields(datagram, start) ?? parsedFields(datagram, start);
  if (line === undefined) return undefined;
  if (typeof line.id !== "string" || line.id === "") return undefined;
  const status = count(line.s);
  if (status === undefined) return undefined;
  const headerSecs = lastNumber(line.ht);
  const prompt = count(line.pt);
  const cached = count(line.ct);
  const completion = count(line.gt);
  return {
    requestId: line.id,
    status,
    upstreamStatus: lastNumber(line.us),
    headerMs: headerSecs === undefined ? undefined : headerSecs * 1000,
    usage:
      prompt === undefined
        ? undefined
        : { promptTokens: prompt, cachedTokens: cached, completionTokens: completion },
  };
}

/**
 * The line as nginx writes it: one flat object of string values, none with an escape (ids,
 * numbers, "-"). Read by scanning for the quotes, one record a datagram at every completion;
 * undefined when the line is anything else (an escape, another shape), for JSON.parse to judge.
 */
function flatFields(text: string, start: number): LogLine | undefined {
  if (text.includes("\\", start)) return undefined;
  const line: MutableLogLine = {
    id: undefined,
    s: undefined,
    us: undefined,
    ht: undefined,
    pt: undefined,
    ct: undefined,
    gt: undefined,
  };
  let i = start + 1;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return undefined;
    const keyEnd = text.indexOf('"', i + 1);
    if (keyEnd === -1 || text.charCodeAt(keyEnd + 1) !== COLON) return undefined;
    if (text.charCodeAt(keyEnd + 2) !== QUOTE) return undefined;
    const valueEnd = text.indexOf('"', keyEnd + 3);
    if (valueEnd === -1) return undefined;
    const key = text.slice(i + 1, keyEnd);
    if (
      key === "id" ||
      key === "s" ||
      key === "us" ||
      key === "ht" ||
      key === "pt" ||
      key === "ct" ||
      key === "gt"
    )
      line[key] = text.slice(keyEnd + 3, valueEnd);
    const next = text.charCodeAt(valueEnd + 1);
    if (next === CLOSE) return text.slice(valueEnd + 2).trim() === "" ? line : undefined;
    if (next !== COMMA) return undefined;
    i = valueEnd + 2;
  }
}

const QUOTE = 0x22;
const COLON = 0x3a;
const COMMA = 0x2c;
const CLOSE = 0x7d;

function parsedFields(text: string, start: number): LogLine | undefined {
  try {
    const value: unknown = JSON.parse(text.slice(start));
    return typeof value === "object" && value !== null ? (value as LogLine) : undefined;
  } catch {
    return undefined;
  }
}

function count(value: string | undefined): number | undefined {
  if (value === undefined || value.length === 0 || value.length > 12) return undefined;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return undefined;
  }
  return Number(value);
}

/** The last of nginx's list of values ("0.004, 0.002" or "502 : 200"), when it is a number. */
function lastNumber(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const cut = Math.max(value.lastIndexOf(","), value.lastIndexOf(":"));
  const last = (cut === -1 ? value : value.slice(cut + 1)).trim();
  if (!NUMBER.test(last)) return undefined;
  return Number(last);
}

const NUMBER = /^\d+(\.\d+)?$/;

export interface CompletionLog {
  readonly port: number;
  close(): void;
}

/** Listens on 127.0.0.1 (any free port) and hands each record to `onRecord`. */
export function readCompletionLog(
  onRecord: (record: CompletionRecord) => void,
): Promise<CompletionLog> {
  const socket: Socket = createSocket("udp4");
  socket.on("message", (msg) => {
    const record = parseRecord(msg.toString("utf8"));
    if (record !== undefined) onRecord(record);
  });
  return new Promise((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(0, "127.0.0.1", () => {
      socket.off("error", reject);
      // Bursts of completions at fleet scale: a larger buffer loses fewer datagrams.
      try {
        socket.setRecvBufferSize(4 * 1024 * 1024);
      } catch {
        // The system's limit stands.
      }
      socket.on("error", () => {});
      resolve({ port: socket.address().port, close: () => socket.close() });
    });
  });
}
