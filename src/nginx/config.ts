/**
 * The nginx.conf radixgate writes for --data-plane nginx: nginx listens on --host/--port, asks
 * radixgate's decision endpoint (a private unix socket) where each inference request goes, relays
 * the worker's answer natively (no buffering), and logs each relayed request to radixgate's
 * completion socket (syslog over loopback UDP). Everything that is not an inference POST (admin,
 * metrics, /debug, the model list) is passed to radixgate's own listener on the same socket.
 */
import { CALL_HEADER, RELAY_VALUES } from "../proxy/remote-relay.js";

export interface NginxConfigOptions {
  /** The private directory: pid, temp paths, the script (mode 0700). */
  readonly dir: string;
  readonly host: string;
  readonly port: number;
  /** radixgate's internal listener (unix socket path). */
  readonly socket: string;
  /** radixgate's completion log socket: 127.0.0.1:<port> (UDP). */
  readonly logPort: number;
  /** The inference POST paths (routes/inference.ts). */
  readonly paths: readonly string[];
  /** Workers known when nginx starts: named upstreams with keep-alive connections. */
  readonly upstreams: ReadonlyArray<{ readonly name: string; readonly address: string }>;
  /** The njs module's path, when nginx does not have it built in; undefined = built in. */
  readonly njsModule: string | undefined;
  readonly connectTimeoutMs: number;
  /** Between two reads of the worker's answer (first byte included): --idle-timeout-secs. */
  readonly readTimeoutMs: number;
  /** The router's body limit (--max-payload-size): the body is read into memory up to it. */
  readonly maxBodyBytes: number;
  /** Response header names the router adds: --queue-wait-header, --explain-header. */
  readonly waitHeader: string | undefined;
  readonly explainHeader: string | undefined;
  /** nginx worker processes (the master forks them); 0 = one process, no master. */
  readonly workerProcesses: number;
}

/**
 * Requests per kept-alive upstream connection before nginx closes it (its default, 1000, is a
 * reconnect every thousand decisions or relays).
 */
const KEEPALIVE_REQUESTS = 1_000_000;
/** Idle connections to radixgate's decision endpoint nginx keeps. */
const DECISION_KEEPALIVE = 1024;

/** nginx's `Nms` time for a duration, at least 1 ms. */
function ms(value: number): string {
  return `${Math.max(1, Math.round(Math.min(value, 2_000_000_000)))}ms`;
}

/** A header name safe in nginx.conf (the config rows already restrict them; this is the guard). */
function headerName(name: string): string {
  if (!/^[A-Za-z0-9-]+$/.test(name)) throw new Error(`header name not usable by nginx: ${name}`);
  return name;
}

/**
 * The decision's values (proxy/remote-relay.ts answers them in headers beside X-Accel-Redirect),
 * copied into variables where the relay begins. They must be copied in the rewrite phase:
 * proxy_pass replaces the request's upstream (ngx_http_upstream_create), after which
 * $upstream_http_* names the worker's answer, not the decision's.
 */
function valueSets(o: NginxConfigOptions, next = false): string[] {
  return Object.entries(RELAY_VALUES)
    .filter(
      ([name]) =>
        (name !== "rg_explain" || o.explainHeader !== undefined) &&
        (name !== "rg_wait" || o.waitHeader !== undefined) &&
        (name !== "rg_next" || next),
    )
    .map(([name, header]) => `      set $${name} $upstream_http_${header.replaceAll("-", "_")};`);
}

/**
 * A relay location: proxies to the worker chosen, buffering off. `sets`: the decision's values
 * are copied here (false where a location before it copied them). `usage`: the body filter reads
 * the engine's token counts. `body`: the body radixgate rewrote replaces the client's.
 */
function relayLocation(
  name: string,
  o: NginxConfigOptions,
  { sets, usage, body }: { sets: boolean; usage: boolean; body: boolean },
) {
  const lines = [
    `    location ${name} {`,
    ...(sets ? valueSets(o) : []),
    "      proxy_pass $rg_up;",
    "      proxy_http_version 1.1;",
    '      proxy_set_header Connection "";',
    '      proxy_set_header X-Radixgate-Client-Addr "";',
    `      proxy_set_header ${CALL_HEADER} "";`,
    "      proxy_set_header Authorization $rg_auth;",
    "      proxy_set_header X-Request-Id $rg_rid;",
    "      proxy_set_header Via $rg_via;",
    "      proxy_set_header traceparent $rg_tp;",
    "      proxy_set_header tracestate $rg_ts;",
    "      proxy_set_header X-Data-Parallel-Rank $rg_rank;",
    "      proxy_buffering off;",
    // The body was read whole for the decision; this proxy_pass sends it again from memory
    // (ngx_http_read_client_request_body returns at once when r->request_body exists).
    "      proxy_request_buffering off;",
    // A client gone closes the worker's connection: the engine stops generating.
    "      proxy_ignore_client_abort off;",
    `      proxy_connect_timeout ${ms(o.connectTimeoutMs)};`,
    `      proxy_read_timeout ${ms(o.readTimeoutMs)};`,
    `      proxy_send_timeout ${ms(o.readTimeoutMs)};`,
    "      proxy_next_upstream off;",
    // The router's own headers replace any the worker sent of the same name.
    "      proxy_hide_header X-Request-Id;",
    "      proxy_hide_header X-Radixgate-Worker;",
    "      proxy_hide_header X-Radixgate-Route;",
    "      add_header X-Radixgate-Worker $rg_worker always;",
    "      add_header X-Radixgate-Route $rg_route always;",
    "      add_header X-Request-Id $rg_rid always;",
  ];
  if (o.waitHeader !== undefined)
    lines.push(`      add_header ${headerName(o.waitHeader)} $rg_wait always;`);
  if (o.explainHeader !== undefined)
    lines.push(`      add_header ${headerName(o.explainHeader)} $rg_explain always;`);
  if (body) lines.push("      proxy_set_body $rg_body;");
  if (usage) lines.push("      js_body_filter rg.usage buffer_type=buffer;");
  // nginx's own 502/504 (no connection, no response header in time): nothing reached the client,
  // so radixgate chooses again. A worker's own error status is passed through as it is.
  lines.push("      error_page 502 504 = @retry;", "    }");
  return lines.join("\n");
}

/** Where nginx asks radixgate: its socket, kept-alive, the client's address named. */
function toRadixgate(call: string): string[] {
  return [
    "      proxy_http_version 1.1;",
    '      proxy_set_header Connection "";',
    "      proxy_set_header X-Radixgate-Client-Addr $remote_addr;",
    `      proxy_set_header ${CALL_HEADER} ${call};`,
  ];
}

export function nginxConfig(o: NginxConfigOptions): string {
  const d = o.dir;
  const upstreams = o.upstreams
    .map(
      (u) =>
        `  upstream ${u.name} {\n    server ${u.address} max_fails=0;\n    keepalive 256;\n    keepalive_timeout 60s;\n    keepalive_requests ${KEEPALIVE_REQUESTS};\n  }`,
    )
    .join("\n");
  // The inference request itself goes to radixgate, body and all: its answer is a decision
  // (X-Accel-Redirect to a relay location, the relay's values in headers) or a refusal, which
  // nginx passes to the client as it is. No script runs on this path.
  const decide = [
    "      proxy_pass http://radixgate;",
    ...toRadixgate("decide"),
    // Admission may hold the decision while the request waits in the queue.
    "      proxy_read_timeout 3600s;",
  ].join("\n");
  const inference = o.paths
    .map(
      (path) =>
        `    location = ${path} {\n      if ($request_method != POST) { rewrite ^ /_rg/pass last; }\n${decide}\n    }`,
    )
    .join("\n");
  const body = Math.max(1024, o.maxBodyBytes);
  const master = o.workerProcesses > 0;
  // Not a decision call, whatever the client sent in the call header.
  const passed = toRadixgate('""').join("\n");
  return `${o.njsModule === undefined ? "" : `load_module ${o.njsModule};\n`}daemon off;
master_process ${master ? "on" : "off"};
worker_processes ${master ? o.workerProcesses : 1};
pid ${d}/nginx.pid;
error_log stderr warn;
events { worker_connections 16384; }
http {
  js_path ${d};
  js_import rg from radixgate.js;
  js_var $rg_body;
  js_var $rg_pt;
  js_var $rg_ct;
  js_var $rg_gt;
  js_var $rg_ri;
  client_body_temp_path ${d}/body;
  proxy_temp_path ${d}/proxy;
  fastcgi_temp_path ${d}/fastcgi;
  uwsgi_temp_path ${d}/uwsgi;
  scgi_temp_path ${d}/scgi;
  # The body is read into memory whole: radixgate reads it for the decision, the relay sends it
  # again to the worker.
  client_max_body_size ${body};
  client_body_buffer_size ${body};
  server_tokens off;
  recursive_error_pages on;
  # A refusal never reaches a relay location: its $rg_* are unset, and that is not worth a warning.
  uninitialized_variable_warn off;
  log_format rg escape=json '{"id":"$rg_key","w":"$rg_worker","s":"$status","us":"$upstream_status","ht":"$upstream_header_time","b":"$body_bytes_sent","pt":"$rg_pt","ct":"$rg_ct","gt":"$rg_gt","ri":"$rg_ri"}';
  access_log syslog:server=127.0.0.1:${o.logPort},tag=radixgate,nohostname rg if=$rg_key;
  # Every inference request makes a decision call, and admission holds the calls of queued
  # requests: as many idle connections are kept as calls may be under way at once, so that a
  # burst does not end in closes and reconnects.
  upstream radixgate {
    server unix:${o.socket};
    keepalive ${DECISION_KEEPALIVE};
    keepalive_requests ${KEEPALIVE_REQUESTS};
  }
${upstreams}
  server {
    listen ${o.host.includes(":") ? `[${o.host}]` : o.host}:${o.port} backlog=4096;
${inference}
    location / {
      proxy_pass http://radixgate;
${passed}
      proxy_buffering off;
      proxy_read_timeout 3600s;
    }
    location ^~ /_radixgate/ { return 404; }
    location = /_rg/pass {
      internal;
      proxy_pass http://radixgate$request_uri;
${passed}
    }
${relayLocation("@relay", o, { sets: true, usage: false, body: false })}
${relayLocation("@relay_u", o, { sets: true, usage: true, body: false })}
    # A body radixgate rewrote (a data-parallel rank, an engine priority) is too large for a
    # header: a script fetches it, then goes on to the relay.
    location @body {
${valueSets(o, true).join("\n")}
      js_content rg.body;
    }
    location = /_rg/body {
      internal;
      proxy_pass http://radixgate;
${toRadixgate("body").join("\n")}
      proxy_set_header X-Radixgate-Request $rg_key;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      subrequest_output_buffer_size 2m;
    }
${relayLocation("@relay_b", o, { sets: false, usage: false, body: true })}
${relayLocation("@relay_u_b", o, { sets: false, usage: true, body: true })}
    # The relay failed before any byte reached the client: radixgate fails that attempt and
    # answers as for the first decision (another worker, or the final error).
    location @retry {
      proxy_pass http://radixgate;
${toRadixgate("retry").join("\n")}
      proxy_set_header X-Radixgate-Request $rg_key;
      proxy_set_header X-Radixgate-Failed $upstream_status;
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_read_timeout 3600s;
    }
  }
}
`;
}
