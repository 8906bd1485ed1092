/**
 * Cost of the usage tap (src/proxy/usage-tap.ts) on the relay path: bytes scanned per second for
 * a streamed chat answer (SSE chunks of ~150 bytes, include_usage) and for a large non-streamed
 * JSON body in 64 KiB chunks, plus the cost per streamed chunk.
 *
 *   npx tsx bench/usage-tap.ts            (npm run bench:usage-tap)
 *
 * Prints a table and writes bench/results/usage-tap.json.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import os from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UsageTap } from "../src/proxy/usage-tap.js";

function sseStream(chunks: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < chunks; i++) {
    const chunk = {
      id: "chatcmpl-1",
      object: "chat.completion.chunk",
      created: 1,
      model: "meta-llama/Llama-3.1-8B-Instruct",
      choices: [{ index: 0, delta: { content: "word " }, logprobs: null, finish_reason: null }],
      usage: null,
    };
    out.push(Buffer.from(`data: ${JSON.stringify(chunk)}\n\n`));
  }
  const usage = {
    choices: [],
    usage: {
      prompt_tokens: 4000,
      completion_tokens: chunks,
      prompt_tokens_details: { cached_tokens: 3000 },
    },
  };
  out.push(Buffer.from(`data: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`));
  return out;
}

function jsonBody(bytes: number): Buffer[] {
  const text = "x".repeat(bytes);
  const body = Buffer.from(
    JSON.stringify({
      choices: [{ text }],
      usage: { prompt_tokens: 10, prompt_tokens_details: { cached_tokens: 5 } },
    }),
  );
  const out: Buffer[] = [];
  for (let i = 0; i < body.length; i += 65_536) out.push(body.subarray(i, i + 65_536));
  return out;
}

function measure(name: string, chunks: Buffer[], rounds: number) {
  const bytes = chunks.reduce((n, c) => n + c.length, 0);
  for (let r = 0; r < 3; r++) scan(chunks); // warm-up
  const started = process.hrtime.bigint();
  for (let r = 0; r < rounds; r++) scan(chunks);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  return {
    case: name,
    bytes_per_answer: bytes,
    chunks_per_answer: chunks.length,
    mb_per_sec: Math.round((bytes * rounds) / seconds / 1e6),
    ns_per_chunk: Math.round((seconds * 1e9) / (rounds * chunks.length)),
    us_per_answer: Math.round(((seconds * 1e6) / rounds) * 10) / 10,
  };
}

function scan(chunks: Buffer[]) {
  const tap = new UsageTap();
  for (const c of chunks) tap.write(c);
  if (tap.result() === undefined) throw new Error("usage not found");
}

const results = [
  measure("SSE chat, 256 tokens", sseStream(256), 400),
  measure("JSON, 1 MB body", jsonBody(1_000_000), 40),
];
console.table(results);
const out = join(dirname(fileURLToPath(import.meta.url)), "results", "usage-tap.json");
mkdirSync(dirname(out), { recursive: true });
writeFileSync(
  out,
  JSON.stringify({ date: new Date().toISOString(), cpus: os.cpus().length, results }, null, 2),
);
