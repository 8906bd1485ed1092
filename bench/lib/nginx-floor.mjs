// The least a Node.js decision process can do behind --data-plane nginx: nginx runs the
// configuration radixgate writes (src/nginx/config.ts), and this process answers every decision
// call with a fixed X-Accel-Redirect (the workers taken in turn), and receives the access log's
// completion datagrams and drops them. No JSON parse, no scheduling, no admission, no logging, no
// metrics. What radixgate's decision process costs above this row is radixgate's to cut; what this
// row costs above plain nginx is the price of asking a Node.js process once per request.
//
// Plain JavaScript run by plain `node`, like the built router: no TypeScript loader in the
// measured process. Started by bench/lib/nginx-floor.ts:
//   node bench/lib/nginx-floor.mjs <unix socket> <upstream name>...
// It prints the UDP port of its completion socket as its first line, then serves.
import { createSocket } from "node:dgram";
import { createServer } from "node:http";

const [socketPath, ...upstreams] = process.argv.slice(2);
let next = 0;

// The relay location radixgate would choose for the same request: the engine's token counts are
// read (an njs body filter) unless the answer is a stream that does not include them. A byte
// search in the body, not a parse: the benchmarks' bodies are JSON.stringify's, without spaces.
const STREAM = Buffer.from('"stream":true');
const USAGE = Buffer.from('"include_usage":true');

const server = createServer((req, res) => {
  if (req.headers["x-radixgate-call"] !== "decide") {
    // Not a decision: /readiness and the like, passed to radixgate by nginx's `location /`.
    req.resume();
    res.writeHead(200, { "content-length": 2 }).end("ok");
    return;
  }
  const chunks = [];
  req.on("data", (chunk) => chunks.push(chunk));
  req.on("end", () => {
    const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    const usage = !body.includes(STREAM) || body.includes(USAGE);
    const i = next++ % upstreams.length;
    res.writeHead(200, {
      "content-length": 0,
      "x-accel-redirect": usage ? "@relay_u" : "@relay",
      "x-rg-up": `http://${upstreams[i]}${req.url}`,
      "x-rg-id": `f${next}`,
      "x-rg-worker": `w${i}`,
    });
    res.end();
  });
});
server.keepAliveTimeout = 65_000;
server.requestTimeout = 0;

const log = createSocket("udp4");
// Received (one wake-up each, as radixgate's), then dropped.
log.on("message", () => {});
log.bind(0, "127.0.0.1", () => {
  try {
    log.setRecvBufferSize(4 * 1024 * 1024);
  } catch {
    // The system's limit stands.
  }
  server.listen(socketPath, () => {
    process.stdout.write(`${log.address().port}\n`);
  });
});
process.on("SIGTERM", () => process.exit(0));
