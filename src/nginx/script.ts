/**
 * The njs module nginx runs for every inference request (--data-plane nginx). Kept as a string so
 * that it ships with the package and is written beside the generated nginx.conf; njs 0.7 (Debian
 * bookworm's libnginx-mod-http-js) is the oldest version it is written for: ES5 with promises,
 * no `let` in loops relied upon, no optional chaining.
 *
 * - route: the client's body goes to radixgate's decision endpoint as a subrequest; a decision
 *   sets the relay's variables and redirects to the relay location, anything else (a refusal:
 *   401, 404, 429, 503 with the OpenAI error body) is the client's answer as it is.
 * - retry: the relay could not connect or got no response header in time (nginx's own 502/504,
 *   before any byte reached the client): radixgate is asked again with the failed status and
 *   answers with another worker, or with the final error.
 * - usage: a body filter that reads the engine's token counts (the last value wins, as
 *   proxy/usage-tap.ts does) into variables the access log carries back to radixgate.
 */
export const NJS_SCRIPT = String.raw`
var COPIED = ['Retry-After', 'X-Request-Id', 'Allow', 'WWW-Authenticate'];

function ask(r, extra) {
  var args = 'p=' + encodeURIComponent(r.variables.request_uri) + extra;
  return r.subrequest('/_rg/decide', { method: 'POST', args: args, body: r.requestText || '' });
}

function follow(r, reply) {
  if (reply.status !== 200 || reply.headersOut['X-Radixgate-Decision'] === undefined) {
    for (var i = 0; i < COPIED.length; i++) {
      var v = reply.headersOut[COPIED[i]];
      if (v !== undefined) r.headersOut[COPIED[i]] = v;
    }
    var wait = r.variables.rg_wait_header;
    if (wait) {
      var w = reply.headersOut[wait];
      if (w !== undefined) r.headersOut[wait] = w;
    }
    r.headersOut['Content-Type'] = reply.headersOut['Content-Type'] || 'application/json';
    r.return(reply.status, reply.responseText || '');
    return;
  }
  var d = JSON.parse(reply.responseText);
  r.variables.rg_up = d.u;
  r.variables.rg_rid = d.id;
  r.variables.rg_worker = d.w;
  r.variables.rg_route = d.route || '';
  r.variables.rg_auth = d.h.authorization || '';
  r.variables.rg_via = d.h.via || '';
  r.variables.rg_tp = d.h.traceparent || '';
  r.variables.rg_ts = d.h.tracestate || '';
  r.variables.rg_rank = d.h['x-data-parallel-rank'] || '';
  r.variables.rg_explain = d.x || '';
  r.variables.rg_wait = d.q || '';
  var target = d.u_usage ? '@relay_u' : '@relay';
  if (d.b !== undefined) {
    r.variables.rg_body = d.b;
    target = target + '_b';
  }
  r.internalRedirect(target);
}

function route(r) {
  ask(r, '').then(function (reply) { follow(r, reply); }).catch(function (e) {
    r.error('radixgate decision failed: ' + e);
    r.return(502);
  });
}

function retry(r) {
  var rid = r.variables.rg_rid;
  var status = r.variables.upstream_status || '502';
  ask(r, '&r=' + encodeURIComponent(rid) + '&s=' + encodeURIComponent(status))
    .then(function (reply) { follow(r, reply); })
    .catch(function (e) {
      r.error('radixgate retry decision failed: ' + e);
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

export default { route: route, retry: retry, usage: usage };
`;
