import { createServer, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { MAX_WATCH_LINE_BYTES, watchLines } from "../../src/discovery/kubernetes-client.js";

/** The watch's reading of the API server's newline-delimited events, over a real socket. */
describe("watchLines", () => {
  let server: Server | undefined;
  afterEach(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
  });

  async function serve(handler: (res: ServerResponse) => void): Promise<URL> {
    server = createServer((_req, res) => handler(res));
    await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
    return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1/pods`);
  }

  function watch(url: URL, headersTimeoutMs = 5000) {
    const events: [string, unknown][] = [];
    const ended = new Promise<unknown>((resolve) => {
      void watchLines(
        url,
        { headers: {} },
        headersTimeoutMs,
        (t, o) => events.push([t, o]),
        resolve,
      );
    });
    return { events, ended };
  }

  it("hands over events split across chunks, skips lines that are not JSON, ends with null", async () => {
    const url = await serve((res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{"a"');
      res.write(':1}}\nnot json\n{"type":"DELETED","object":{}}\n{"type":"MODIF');
      res.end('IED","object":{"b":2}}\n');
    });
    const { events, ended } = watch(url);
    expect(await ended).toBeNull();
    expect(events).toEqual([
      ["ADDED", { a: 1 }],
      ["DELETED", {}],
      ["MODIFIED", { b: 2 }],
    ]);
  });

  it("a line with no newline ends the watch once it passes the bound, not 300 MB later", async () => {
    let sent = 0;
    const chunk = Buffer.alloc(64 * 1024, "x");
    const url = await serve((res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{"metadata":{"name":"');
      const pump = () => {
        while (sent < 300e6 && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once("drain", pump);
        }
      };
      res.on("error", () => {});
      pump();
    });
    const { events, ended } = watch(url);
    expect(String(await ended)).toContain(`${MAX_WATCH_LINE_BYTES} bytes without a newline`);
    expect(events).toEqual([]);
    // What was read is about the bound (the rest sat in socket buffers when the watch ended).
    expect(sent).toBeLessThan(MAX_WATCH_LINE_BYTES + 16 * 1024 * 1024);
  });

  it("a status other than 200 ends the watch with it as statusCode", async () => {
    const url = await serve((res) => res.writeHead(410).end("{}"));
    const err = (await watch(url).ended) as { statusCode?: number };
    expect(err.statusCode).toBe(410);
  });

  it("no response headers in time ends the watch", async () => {
    const url = await serve(() => {});
    expect(String(await watch(url, 200).ended)).toContain("no response headers within 200 ms");
  });
});
