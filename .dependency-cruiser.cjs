// The layering rule of docs/architecture.md, checked by `npm run lint` (issue 21).
//
// LAYERS is the one written order of src/, top to bottom. A module may import its own folder and
// anything in a layer below its own; never a layer above, and never a sibling of its own layer
// (siblings are independent pieces at the same height). Since nothing points up or sideways,
// there is no cycle between folders. A new folder or top-level file must be placed here
// before lint passes.
const LAYERS = [
  {
    // Entry points.
    entry: [
      "cli.ts",
      "cli-options.ts",
      "cli-error.ts",
      "compat-flags.ts",
      "cluster.ts",
      "healthcheck.ts",
      "healthcheck-target.ts",
      "parent-watch.ts",
    ],
  },
  // listen.ts: the HTTP server listening, and the usage error when it cannot.
  // assembly/: the named builders server.ts assembles the router from (index stack, data plane, routes).
  // config.ts places every feature's settings rows (<feature>/settings.ts) into the nested Config,
  // so it sits above every feature: only the entry points and the assembly read Config, and each
  // feature gets its own options, never Config. server-settings.ts: the process's own rows.
  {
    server: [
      "server.ts",
      "listen.ts",
      "command-line-workers.ts",
      "config.ts",
      "server-settings.ts",
      "assembly/",
    ],
  },
  // router-policy.ts: --policy or --scheduler-config → the Policy the decider runs.
  { routes: ["routes/"], "router-policy": ["router-policy.ts"] },
  // --data-plane nginx: nginx's configuration, its njs script, its supervision and the completion
  // log it writes; the assembly wires them to the relays of proxy/remote-relay.ts.
  { nginx: ["nginx/"] },
  // The metric set: it knows the features below it.
  { metrics: ["metrics.ts", "metric-alias.ts", "metric-tally.ts"] },
  // Worker sources (--worker-file, --worker-dns) and the one membership path they share with the
  // admin API: they feed workers/ and kv-events/, and know nothing of HTTP routes.
  { discovery: ["discovery/"] },
  // A request's path is the order of the layers from here down: routes → intake → admission →
  // (disaggregation →) proxy, which asks scheduling and sends upstream. What it has
  // left, it never imports again (docs/architecture.md, "One request, end to end").
  // One RoutingRequest per request (body read and budget, routing text, model, session, tokenize
  // input): the routes hand it the HTTP request, the data plane below gets the RoutingRequest.
  { intake: ["intake/"] },
  // Per-tenant quotas (--tenant-quota): an admission step, counted locally or in Redis.
  { quotas: ["quotas/"] },
  // Tenant and priority, saturation of the fleet, the fair priority queue (issue 24): between the
  // request's intake and its routing.
  { admission: ["admission/"] },
  // disaggregation/: prefill/decode pairs (flags, the pair's dispatch over proxy/'s attempts);
  // it takes the RoutingRequest intake made, so it sits below intake and admission.
  { disaggregation: ["disaggregation/"] },
  { proxy: ["proxy/"] },
  // OpenTelemetry tracing: the request path's span hooks (interfaces) and, loaded only when on,
  // the SDK behind them; it reads the cache account and the decision, never HTTP routes.
  { tracing: ["tracing/"] },
  // The per-request cache account (available, chosen, reported cached tokens), its sums, the
  // --explain-header value and its settings rows: the forwarder fills it, the routes read it.
  { "cache-account": ["cache-account/"] },
  // The scheduler: every --policy is a profile of filters, scorers and a picker; reads indexes
  // and worker signals, never HTTP.
  { scheduling: ["scheduling/"] },
  // Redis shared state wraps the index and syncs membership; KV events feed the index. Both are
  // wired by assembly/index-stack.ts; the request path above (proxy, scheduling) never imports them
  // (rule request-path-reads-the-index).
  { state: ["state/"], "kv-events": ["kv-events/"] },
  // The index never knows workers, workers never know the index: assembly/ joins them.
  { index: ["index/"], workers: ["workers/"] },
  { tree: ["tree/"], engines: ["engines/"] },
  // The config kit: the typed settings row, the parsers (durations become ms here) and the table
  // functions every feature's settings.ts uses; it knows no feature.
  // watched-file/: a small configuration file read again when it changes, the last good version
  // kept (--worker-file in discovery/, --tenant-quota in quotas/).
  { "config-kit": ["config-kit/"], "watched-file": ["watched-file/"] },
  {
    logger: ["logger.ts", "log-digest.ts"],
    errors: ["errors.ts"],
    hash: ["hash/"],
    types: ["types/"],
  },
];

// Upward or sideways imports still to be removed: { from, to, why } (module paths under src/,
// why names the issue). Empty means the rule has no exception.
const ALLOWED = [];

const esc = (s) => s.replace(/[.+?^${}()|[\]\\]/g, "\\$&");
const pathOf = (entries) =>
  `^src/(${entries.map((e) => (e.endsWith("/") ? esc(e) : `${esc(e)}$`)).join("|")})`;

const PLACED = pathOf(LAYERS.flatMap((l) => Object.values(l).flat()));
const forbidden = [];
LAYERS.forEach((layer, depth) => {
  const above = LAYERS.slice(0, depth).flatMap((l) => Object.values(l).flat());
  for (const [name, entries] of Object.entries(layer)) {
    const siblings = Object.entries(layer)
      .filter(([other]) => other !== name)
      .flatMap(([, e]) => e);
    const banned = [...above, ...siblings];
    if (banned.length === 0) continue;
    forbidden.push({
      name: `layer-${name}`,
      severity: "error",
      comment:
        `${name} imports only its own folder and the layers below it ` +
        "(.dependency-cruiser.cjs LAYERS, docs/architecture.md#layers)",
      from: { path: pathOf(entries) },
      to: { path: pathOf(banned) },
    });
  }
});

forbidden.push({
  name: "request-path-reads-the-index",
  severity: "error",
  comment: "proxy and scheduling read index/ and workers/, never the feeders state/ and kv-events/",
  from: { path: pathOf(["proxy/", "scheduling/"]) },
  to: { path: pathOf(["state/", "kv-events/"]) },
});

const WHOLE_TREE_RULES = [
  {
    // The simulator (top-level sim/: tests, benches, demo) is a client of the router's formats
    // and may import src/; the router never imports it, since sim/ is not in the package.
    name: "router-never-imports-the-simulator",
    severity: "error",
    comment:
      "src/ never imports sim/: the simulator is not built or shipped (docs/architecture.md)",
    from: { path: "^src/" },
    to: { path: "^sim/" },
  },
  {
    name: "unplaced",
    severity: "error",
    comment:
      "every file of src/ belongs to a layer: add its folder to LAYERS in .dependency-cruiser.cjs",
    from: { path: "^src/", pathNot: PLACED },
    to: {},
  },
  {
    name: "unplaced",
    severity: "error",
    comment:
      "every file of src/ belongs to a layer: add its folder to LAYERS in .dependency-cruiser.cjs",
    from: {},
    to: { path: "^src/", pathNot: PLACED },
  },
  {
    name: "no-circular",
    severity: "error",
    comment: "modules import each other in a cycle",
    from: { path: "^(src|sim)/" },
    to: { circular: true },
  },
];

/** A rule minus the ALLOWED edges it would report: those files get a copy without that target. */
function withExceptions(rule) {
  const exceptions = ALLOWED.filter(
    (a) =>
      new RegExp(rule.from.path).test(`src/${a.from}`) &&
      new RegExp(rule.to.path).test(`src/${a.to}`),
  );
  if (exceptions.length === 0) return [rule];
  const files = [...new Set(exceptions.map((a) => a.from))];
  return [
    { ...rule, from: { ...rule.from, pathNot: files.map((f) => `^src/${esc(f)}$`) } },
    ...files.map((f) => ({
      ...rule,
      from: { path: `^src/${esc(f)}$` },
      to: {
        ...rule.to,
        pathNot: exceptions.filter((a) => a.from === f).map((a) => `^src/${esc(a.to)}$`),
      },
    })),
  ];
}

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [...forbidden.flatMap(withExceptions), ...WHOLE_TREE_RULES],
  options: {
    includeOnly: "^(src|sim)/",
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
  },
};
