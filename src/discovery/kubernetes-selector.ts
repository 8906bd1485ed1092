/**
 * Equality label selectors as SGLang's router takes them: `--selector app=sglang role=worker`
 * (space-separated `key=value` pairs, all of which must match). Commas separate pairs too, as in
 * Kubernetes' own `app=sglang,role=worker`. sgl-project/sglang
 * sgl-model-gateway/bindings/python/src/sglang_router/router_args.py (`_parse_selector`) and
 * sgl-model-gateway/src/service_discovery.rs (`PodInfo::matches_selector`).
 */
export type LabelSelector = ReadonlyMap<string, string>;

/** A label key: an optional DNS-subdomain prefix and a slash, then a name of 1-63 characters. */
const KEY =
  /^(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
/** A label value: empty, or 1-63 characters starting and ending with an alphanumeric. */
const VALUE = /^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$/;

/**
 * Parses `key=value` pairs (separated by spaces or commas); throws an Error naming the pair that
 * is not one. An empty list is an empty selector.
 */
export function parseLabelSelector(pairs: readonly string[]): LabelSelector {
  const selector = new Map<string, string>();
  for (const pair of pairs.flatMap((p) => p.split(/[\s,]+/)).filter((p) => p !== "")) {
    const eq = pair.indexOf("=");
    const key = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? "" : pair.slice(eq + 1).replace(/^=/, "");
    const name = key.slice(key.lastIndexOf("/") + 1);
    if (eq < 0 || !KEY.test(key) || name.length > 63 || key.length > 316) {
      throw new Error(`"${pair}" is not a label key=value pair (e.g. app=sglang)`);
    }
    if (!VALUE.test(value) || value.length > 63) {
      throw new Error(`"${pair}": the label value is not a valid Kubernetes label value`);
    }
    const before = selector.get(key);
    if (before !== undefined && before !== value) {
      throw new Error(`"${key}" is given twice with different values (${before}, ${value})`);
    }
    selector.set(key, value);
  }
  return selector;
}

/** The selector in the API's `labelSelector` form: `app=sglang,role=worker`. */
export function formatLabelSelector(selector: LabelSelector): string {
  return [...selector].map(([k, v]) => `${k}=${v}`).join(",");
}

/** Every pair of the selector is among the labels (an empty selector matches nothing). */
export function matchesLabels(
  selector: LabelSelector,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  if (selector.size === 0 || labels === undefined) return false;
  for (const [key, value] of selector) {
    if (labels[key] !== value) return false;
  }
  return true;
}
