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
 *   proxy/usage-tap.ts does) into variables the access log carries back to radixgate. It is
 *   attached only where the engine sends counts and the router reads them.
 */
export const NJS_SCRIPT = String.raw`
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

var KEYS = [
  [/"prompt_tokens"\s*:\s*(\d+)/g, 'rg_pt'],
  [/"cached_tokens"\s*:\s*(\d+)/g, 'rg_ct'],
  [/"completion_tokens"\s*:\s*(\d+)/g, 'rg_gt'],
];

// data is a Buffer (js_body_filter ... buffer_type=buffer): most chunks are only searched, natively.
function usage(r, data, flags) {
  if (data.length > 0 && data.indexOf('_tokens"') !== -1) {
    var text = data.toString();
    for (var i = 0; i < KEYS.length; i++) {
      var re = KEYS[i][0];
      var last = undefined;
      var m;
      re.lastIndex = 0;
      while ((m = re.exec(text)) !== null) last = m[1];
      if (last !== undefined) r.variables[KEYS[i][1]] = last;
    }
  }
  r.sendBuffer(data, flags);
}

export default { body: body, usage: usage };
`;
