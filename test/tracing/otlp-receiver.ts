import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** A span as OTLP/HTTP JSON carries it (hex ids; the fields the tests read). */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: Array<{ key: string; value: Record<string, unknown> }>;
  events?: Array<{ name: string }>;
  status?: { code?: number };
}

/** A small OTLP/HTTP receiver on 127.0.0.1, port 0: keeps each POST's body and content type. */
export class OtlpReceiver {
  readonly posts: Array<{ path: string; contentType: string; body: Buffer }> = [];
  private server: Server | undefined;

  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const contentType = String(req.headers["content-type"] ?? "");
        this.posts.push({ path: req.url ?? "", contentType, body: Buffer.concat(chunks) });
        // An empty ExportTraceServiceResponse: full success, in either encoding.
        res.writeHead(200, { "content-type": contentType || "application/json" });
        res.end(contentType.includes("json") ? "{}" : "");
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Every span received as JSON. */
  spans(): OtlpSpan[] {
    const out: OtlpSpan[] = [];
    for (const post of this.posts) {
      if (!post.contentType.includes("json")) continue;
      const body = JSON.parse(post.body.toString("utf8")) as {
        resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
      };
      for (const rs of body.resourceSpans ?? [])
        for (const ss of rs.scopeSpans ?? []) out.push(...(ss.spans ?? []));
    }
    return out;
  }

  /** The service.name resources the posts named (JSON only). */
  serviceNames(): string[] {
    const names: string[] = [];
    for (const post of this.posts) {
      if (!post.contentType.includes("json")) continue;
      const body = JSON.parse(post.body.toString("utf8")) as {
        resourceSpans?: Array<{ resource?: { attributes?: OtlpSpan["attributes"] } }>;
      };
      for (const rs of body.resourceSpans ?? []) {
        const name = attribute({ attributes: rs.resource?.attributes }, "service.name");
        if (typeof name === "string") names.push(name);
      }
    }
    return names;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve());
  }
}

/** An attribute's value (string, int, double or bool), or undefined. */
export function attribute(
  span: { attributes?: OtlpSpan["attributes"] | undefined },
  key: string,
): unknown {
  const value = span.attributes?.find((a) => a.key === key)?.value;
  if (value === undefined) return undefined;
  if ("stringValue" in value) return value.stringValue;
  if ("intValue" in value) return Number(value.intValue);
  if ("doubleValue" in value) return value.doubleValue;
  if ("boolValue" in value) return value.boolValue;
  return undefined;
}
