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
 *   proxy/usage-tap.ts does) from the answer's last 16 KB, at its end, into variables the
 *   access log carries back to radixgate. It is attached only where the engine sends counts.
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

// Per request (each request runs in its own copy of the VM): the answer's last buffers, read
// once at its end. Searching every chunk as it passed cost more than relaying it: njs searches
// a Buffer with a memcmp per byte, and its regular expressions go through PCRE.
var TAIL_BYTES = 16384;
var tail = [];
var tailBytes = 0;

var KEYS = [
  ['"prompt_tokens"', 'rg_pt'],
  ['"cached_tokens"', 'rg_ct'],
  ['"completion_tokens"', 'rg_gt'],
];

function isSpace(c) {
  return c === 32 || c === 10 || c === 13 || c === 9;
}

// The value of the last occurrence of key followed by a number ("key": null is passed over).
// Bytes, not a string: njs reads a UTF-8 string by decoding it from its start.
function lastCount(buf, key) {
  var at = buf.lastIndexOf(key);
  while (at !== -1) {
    var i = at + key.length;
    while (isSpace(buf[i])) i++;
    if (buf[i] === 58) {
      i++;
      while (isSpace(buf[i])) i++;
      var n = 0;
      var j = i;
      while (j < buf.length && j - i < 12 && buf[j] >= 48 && buf[j] <= 57) {
        n = n * 10 + (buf[j] - 48);
        j++;
      }
      if (j > i) return String(n);
    }
    at = at === 0 ? -1 : buf.lastIndexOf(key, at - 1);
  }
  return undefined;
}

// The engine's counts are at the answer's end (the final usage chunk of a stream, the usage or
// meta_info of a JSON answer), and the last value wins, as in proxy/usage-tap.ts.
function usage(r, data, flags) {
  if (data.length > 0) {
    tail.push(data);
    tailBytes += data.length;
    while (tailBytes - tail[0].length >= TAIL_BYTES) tailBytes -= tail.shift().length;
  }
  if (flags.last && tailBytes > 0) {
    var all = tail.length === 1 ? tail[0] : Buffer.concat(tail);
    for (var k = 0; k < KEYS.length; k++) {
      var v = lastCount(all, KEYS[k][0]);
      if (v !== undefined) r.variables[KEYS[k][1]] = v;
    }
  }
  r.sendBuffer(data, flags);
}

export default { body: body, usage: usage };
`;
