// The floor of any Node.js reverse proxy, for bench:overhead: node:http in front, undici's pool to
// the worker behind, the body read whole and sent on, the answer streamed back. No routing, no
// limits, no logging, no metrics. Whatever the router costs above this row is ours to cut; what
// this row costs above nginx is the runtime's (one JavaScript event loop, two HTTP parsers).
//
// Plain JavaScript run by plain `node`, like the built router (bench/lib/built-router.ts): no
// TypeScript loader in the measured process. Started by bench/lib/bare-node-proxy.ts:
//   node bench/lib/bare-node-proxy.mjs <port> <worker url>...   (several: round robin)
// With DRAIN_ABOVE_BYTES=<n> in its environment, a body larger than n bytes is only read (its
// chunks counted and dropped) and answered 200 at once: bench:faults' floor of what receiving a
// big body costs a Node.js process, with nothing kept, parsed or sent on.
import { createServer } from "node:http";
import { Pool } from "undici";

const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "host"]);
const [port, ...upstreams] = process.argv.slice(2);
const pools = upstreams.map((url) => new Pool(url, { connections: 128, pipelining: 1 }));
let next = 0;
const drainAbove = Number(process.env.DRAIN_ABOVE_BYTES ?? Number.POSITIVE_INFINITY);

function copyHeaders(from, skipLength) {
  const out = {};
  for (const name in from) {
    const value = from[name];
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    if (skipLength && name === "content-length") continue;
    out[name] = value;
  }
  return out;
}

function drain(req, res) {
  let size = 0;
  req.on("data", (chunk) => {
    size += chunk.length;
  });
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json" }).end(`{"drained":${size}}`);
  });
}

const server = createServer((req, res) => {
  // Draining, it stands for the router: its own /health, as the router answers its own.
  if (drainAbove < Number.POSITIVE_INFINITY && req.url === "/health") {
    return void res.writeHead(200).end();
  }
  if (Number(req.headers["content-length"]) > drainAbove) return drain(req, res);
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const pool = pools[next++ % pools.length];
    pool
      .request({
        method: req.method,
        path: req.url ?? "/",
        headers: copyHeaders(req.headers, true),
        body: Buffer.concat(chunks),
      })
      .then(
        (answer) => {
          res.writeHead(answer.statusCode, copyHeaders(answer.headers, false));
          answer.body.pipe(res);
        },
        () => res.writeHead(502).end(),
      );
  });
});
server.keepAliveTimeout = 65_000;
server.listen(Number(port), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
