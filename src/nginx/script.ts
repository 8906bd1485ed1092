/**
 * The njs module nginx runs for --data-plane nginx. Kept as a string so that it ships with the
 * package and is written beside the generated nginx.conf; njs 0.7 (Debian bookworm's
 * libnginx-mod-http-js) is the oldest version it is written for: ES5 with promises, no `let` in
 * loops relied upon, no optional chaining.
 *
 * The decision itself needs no script: nginx proxies the request to radixgate, whose answer
 * redirects it to a relay location (config.ts). Only two things do:
 * - body: radixgate rewrote the body (a data-parallel rank, an engine priority): it is fetched
 *   from radixgate, set as the relay's body, and the request goes on to the relay named.
 * - usage: a body filter that reads the engine's token counts (the last value wins, as
 *   proxy/usage-tap.ts does) from the answer's last four reads, at its end, into variables the
 *   access log carries back to radixgate. It is attached only where the engine sends counts.
 *   For the Responses API it also reads the answer's id from its first read (the engines write
 *   it first, workers/response-holders.ts ResponseIdSniffer), so that radixgate learns which
 *   worker holds the response.
 */
export const NJS_SCRIPT = `
function body(r) {
  r.subrequest('/_rg/body', { method: 'GET' }).then(function (reply) {
    if (reply.status !== 200) {
      r.return(502);
      return;
    }
    r.variables.rg_body = reply.responseText || '';
    r.internalRedirect(r.variables.rg_next || '@relay_b');
  }).catch(function (e) {
    r.error('radixgate body fetch failed: ' + e);
    r.return(502);
  });
}

// Per request (each request runs in its own copy of the VM): the answer's last four reads, read
// once at its end (searching every chunk cost more than relaying it: njs searches a Buffer with a
// memcmp per byte). Four variables, not an array trimmed to a byte count: this runs on every
// chunk, and njs pays a property lookup for each push, shift and length. A read is at most a
// memory page (proxy_buffer_size); the engines write their counts last, in one chunk of a few
// hundred bytes (SGLang: python/sglang/srt/entrypoints/openai/usage_processor.py; vLLM:
// vllm/entrypoints/openai/serving_chat.py, its final usage chunk) that at most [DONE] follows.
var head = null;
var tail0 = null;
var tail1 = null;
var tail2 = null;
var tail3 = null;

var KEYS = [
  ['"prompt_tokens"', 'rg_pt'],
  ['"cached_tokens"', 'rg_ct'],
  ['"completion_tokens"', 'rg_gt'],
];

// The value of the last occurrence of key followed by a number ("key": null is passed over).
// Bytes, not a string: njs reads a UTF-8 string by decoding it from its start. Each byte is read
// once and the spaces are tested inline: every indexed read and call is an njs operation.
function lastCount(buf, key) {
  var end = buf.length;
  var at = buf.lastIndexOf(key);
  while (at !== -1) {
    var i = at + key.length;
    var c = buf[i];
    while (c === 32 || c === 10 || c === 13 || c === 9) c = buf[++i];
    if (c === 58) {
      c = buf[++i];
      while (c === 32 || c === 10 || c === 13 || c === 9) c = buf[++i];
      var start = i;
      var n = 0;
      while (i < end && i - start < 12 && c >= 48 && c <= 57) {
        n = n * 10 + (c - 48);
        c = buf[++i];
      }
      if (i > start) return String(n);
    }
    at = at === 0 ? -1 : buf.lastIndexOf(key, at - 1);
  }
  return undefined;
}

// The engine's counts are at the answer's end (the final usage chunk of a stream, the usage or
// meta_info of a JSON answer), and the last value wins, as in proxy/usage-tap.ts.
function usage(r, data, flags) {
  if (data.length > 0) {
    if (head === null) head = data;
    tail0 = tail1;
    tail1 = tail2;
    tail2 = tail3;
    tail3 = data;
  }
  if (flags.last && tail3 !== null) {
    counts(r);
    if (r.uri === '/v1/responses') responseId(r);
  }
  r.sendBuffer(data, flags);
}

// The id of a Responses answer: first in a JSON answer, in a stream's first event
// (response.created). The same shape as ResponseIdSniffer's.
var RESPONSE_ID = /"id"\\s*:\\s*"(resp[A-Za-z0-9_.:-]{1,200})"/;

function responseId(r) {
  var m = RESPONSE_ID.exec(head.toString());
  if (m !== null) r.variables.rg_ri = m[1];
}

function counts(r) {
  var parts = [];
  if (tail0 !== null) parts.push(tail0);
  if (tail1 !== null) parts.push(tail1);
  if (tail2 !== null) parts.push(tail2);
  parts.push(tail3);
  var all = parts.length === 1 ? parts[0] : Buffer.concat(parts);
  for (var k = 0; k < KEYS.length; k++) {
    var v = lastCount(all, KEYS[k][0]);
    if (v !== undefined) r.variables[KEYS[k][1]] = v;
  }
}

export default { body: body, usage: usage };
`;
