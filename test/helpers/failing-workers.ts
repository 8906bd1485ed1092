import { createServer, type Server, type Socket } from "node:net";

/** Workers that answer every request with one failing status, on a kept-alive connection. */
export interface FailingWorkers {
  urls: string[];
  /** Request paths received, in order, all workers together. */
  paths: string[];
  /** Connections open now (the router decides whether to keep them). */
  open: Set<Socket>;
  close(): Promise<void>;
}

export async function startFailingWorkers(
  count: number,
  statusLine: string,
): Promise<FailingWorkers> {
  const servers: Server[] = [];
  const open = new Set<Socket>();
  const paths: string[] = [];
  const urls: string[] = [];
  for (let i = 0; i < count; i++) {
    const server = createServer((socket) => {
      open.add(socket);
      socket.on("error", () => {});
      socket.on("close", () => open.delete(socket));
      socket.on("data", (data) => {
        for (const line of data.toString("latin1").split("\r\n")) {
          const m = /^(GET|POST) (\S+) HTTP/.exec(line);
          if (m === null) continue;
          paths.push(m[2] as string);
          socket.write(`HTTP/1.1 ${statusLine}\r\nContent-Length: 0\r\n\r\n`);
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push(server);
    urls.push(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  }
  return {
    urls,
    paths,
    open,
    async close() {
      for (const s of open) s.destroy();
      await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
    },
  };
}
