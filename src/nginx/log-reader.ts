/**
 * radixgate's end of nginx's access log: nginx sends one syslog datagram per relayed request
 * (`access_log syslog:server=127.0.0.1:<port>,tag=radixgate,nohostname`, nginx.conf written by
 * config.ts), and each becomes a completion record for the request's attempt. Loopback UDP, not a
 * unix datagram socket: Node's dgram has no AF_UNIX. A datagram lost under pressure leaves its
 * attempt to the expiry of proxy/remote-relay.ts.
 */
import { createSocket, type Socket } from "node:dgram";
import type { CompletionRecord } from "../proxy/remote-relay.js";
import { isResponseId } from "../workers/response-holders.js";

/** The log_format's fields read here (config.ts): every value a string, "" or "-" when unset. */
interface LogLine {
  readonly id?: string | undefined;
  readonly s?: string | undefined;
  readonly us?: string | undefined;
  readonly ht?: string | undefined;
  readonly pt?: string | undefined;
  readonly ct?: string | undefined;
  readonly gt?: string | undefined;
  readonly ri?: string | undefined;
}

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
    key: line.id,
    status,
    upstreamStatus: lastNumber(line.us),
    headerMs: headerSecs === undefined ? undefined : headerSecs * 1000,
    usage:
      prompt === undefined
        ? undefined
        : { promptTokens: prompt, cachedTokens: cached, completionTokens: completion },
    responseId: typeof line.ri === "string" && isResponseId(line.ri) ? line.ri : undefined,
  };
}

/**
 * The line as nginx writes it: one flat object of string values, none with an escape (ids,
 * numbers, "-"). Read by scanning for the quotes, one record a datagram at every completion;
 * undefined when the line is anything else (an escape, another shape), for JSON.parse to judge.
 * Keys are told apart by their characters, not cut out: only the values read are copied.
 */
function flatFields(text: string, start: number): LogLine | undefined {
  if (text.includes("\\", start)) return undefined;
  // The values by field number (fieldAt), the record made once at the end: a store keyed by the
  // field's name went through V8's generic store for every field of every record.
  const values: (string | undefined)[] = [
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
    undefined,
  ];
  let i = start + 1;
  for (;;) {
    if (text.charCodeAt(i) !== QUOTE) return undefined;
    const keyEnd = text.indexOf('"', i + 1);
    if (keyEnd === -1 || text.charCodeAt(keyEnd + 1) !== COLON) return undefined;
    if (text.charCodeAt(keyEnd + 2) !== QUOTE) return undefined;
    const valueEnd = text.indexOf('"', keyEnd + 3);
    if (valueEnd === -1) return undefined;
    const field = fieldAt(text, i + 1, keyEnd);
    if (field !== -1) values[field] = text.slice(keyEnd + 3, valueEnd);
    const next = text.charCodeAt(valueEnd + 1);
    if (next === CLOSE) {
      if (!onlySpaceAfter(text, valueEnd + 2)) return undefined;
      return {
        id: values[ID],
        s: values[S],
        us: values[US],
        ht: values[HT],
        pt: values[PT],
        ct: values[CT],
        gt: values[GT],
        ri: values[RI],
      };
    }
    if (next !== COMMA) return undefined;
    i = valueEnd + 2;
  }
}

/** The fields read, numbered in LogLine's order. */
const ID = 0;
const S = 1;
const US = 2;
const HT = 3;
const PT = 4;
const CT = 5;
const GT = 6;
const RI = 7;

/** The number of the field named by text[from, to), or -1 when it is none of them. */
function fieldAt(text: string, from: number, to: number): number {
  const a = text.charCodeAt(from);
  if (to - from === 1) return a === 0x73 ? S : -1;
  if (to - from !== 2) return -1;
  const b = text.charCodeAt(from + 1);
  if (b === 0x74) {
    if (a === 0x68) return HT;
    if (a === 0x70) return PT;
    if (a === 0x63) return CT;
    if (a === 0x67) return GT;
    return -1;
  }
  if (a === 0x69 && b === 0x64) return ID;
  if (a === 0x72 && b === 0x69) return RI;
  if (a === 0x75 && b === 0x73) return US;
  return -1;
}

/** Whether text holds only white space from `from` on (what trim() removes). */
function onlySpaceAfter(text: string, from: number): boolean {
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x0a && c !== 0x0d && c !== 0x09) return text.slice(i).trim() === "";
  }
  return true;
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
  // One value, digits and at most one point inside (nearly every record): no cut, no trim.
  if (isDecimal(value)) return Number(value);
  const cut = Math.max(value.lastIndexOf(","), value.lastIndexOf(":"));
  const last = (cut === -1 ? value : value.slice(cut + 1)).trim();
  return isDecimal(last) ? Number(last) : undefined;
}

/** Whether `value` is digits, or digits, a point and digits (/^\d+(\.\d+)?$/). */
function isDecimal(value: string): boolean {
  let point = -1;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x2e && point === -1 && i > 0) point = i;
    else if (c < 0x30 || c > 0x39) return false;
  }
  return value.length > 0 && point !== value.length - 1;
}

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
