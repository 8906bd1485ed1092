/**
 * radixgate's end of nginx's access log: nginx sends one syslog datagram per relayed request
 * (`access_log syslog:server=127.0.0.1:<port>,tag=radixgate,nohostname`, nginx.conf written by
 * config.ts), and each becomes a completion record for the request's attempt. Loopback UDP, not a
 * unix datagram socket: Node's dgram has no AF_UNIX. A datagram lost under pressure leaves its
 * attempt to the expiry of proxy/remote-relay.ts.
 */
import { createSocket, type Socket } from "node:dgram";
import type { CompletionRecord } from "../proxy/remote-relay.js";

/** The log_format's fields (config.ts): every value a string, "" or "-" when unset. */
interface LogLine {
  readonly id?: string;
  readonly s?: string;
  readonly us?: string;
  readonly ht?: string;
  readonly pt?: string;
  readonly ct?: string;
  readonly gt?: string;
}

/**
 * One datagram's record; undefined when it is not one (another sender, a line without a request).
 * `$upstream_status` and `$upstream_header_time` list every upstream tried in the request
 * ("502, 200"): the last is the answer's.
 */
export function parseRecord(datagram: string): CompletionRecord | undefined {
  const start = datagram.indexOf("{");
  if (start === -1) return undefined;
  let line: LogLine;
  try {
    line = JSON.parse(datagram.slice(start)) as LogLine;
  } catch {
    return undefined;
  }
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

function count(value: string | undefined): number | undefined {
  if (value === undefined || !/^\d{1,12}$/.test(value)) return undefined;
  return Number(value);
}

function lastNumber(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const last = value.split(/[,:]/).pop()?.trim() ?? "";
  if (!/^\d+(\.\d+)?$/.test(last)) return undefined;
  return Number(last);
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
