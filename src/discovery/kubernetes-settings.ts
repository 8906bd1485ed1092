import { flagValue, integer, type Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { parseLabelSelector } from "./kubernetes-selector.js";
import type { KubernetesDiscoveryOptions } from "./kubernetes-source.js";

/**
 * The Kubernetes discovery settings, under SGLang's router flag names (sgl-project/sglang
 * sgl-model-gateway/bindings/python/src/sglang_router/router_args.py, "Service Discovery
 * (Kubernetes)"), plus --kubeconfig. src/config.ts places them as Config.kubernetes.
 */
export interface KubernetesDiscoverySettings {
  /** --service-discovery: watch Kubernetes pods for workers. */
  serviceDiscovery: boolean;
  /** --selector: `key=value` pairs a regular worker pod has (all of them). */
  selector: string[];
  /** --service-discovery-port: the workers' port on each pod IP. */
  serviceDiscoveryPort: number;
  /** --service-discovery-namespace ("" = every namespace). */
  serviceDiscoveryNamespace: string;
  /** --prefill-selector / --decode-selector: the PD roles' pods (with disaggregation). */
  prefillSelector: string[];
  decodeSelector: string[];
  /** --kubeconfig ("" = in-cluster, else $KUBECONFIG or ~/.kube/config). */
  kubeconfig: string;
}

/** `key=value` pairs, checked here so that a bad one stops the start with its flag named. */
const selector: Parser<string[]> = (raw, flag) => {
  try {
    return [...parseLabelSelector([raw])].map(([k, v]) => `${k}=${v}`);
  } catch (err) {
    throw new ConfigError(flag, (err as Error).message);
  }
};

/** A DNS-1123 label, as Kubernetes names namespaces. */
const namespace: Parser<string> = (raw, flag) => {
  const value = raw.trim();
  if (value !== "" && !/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(value)) {
    throw new ConfigError(flag, `must be a Kubernetes namespace name, got "${raw}"`);
  }
  return value;
};

const SEE = "See docs/discovery.md.";

export const KUBERNETES_SETTINGS = section<KubernetesDiscoverySettings>({
  serviceDiscovery: {
    flag: "--service-discovery",
    arg: "[bool]",
    description: `Find workers by watching Kubernetes pods that match --selector (SGLang's router flag): a running, ready pod is a worker at http://POD_IP:--service-discovery-port; a pod that stops being ready, terminates or is deleted drains. ${SEE}`,
    default: false,
    parse: flagValue,
  },
  selector: {
    flag: "--selector",
    arg: "<key=value...>",
    description:
      "With --service-discovery: the labels a worker pod has (all of them), e.g. app=sglang role=worker.",
    default: [],
    parse: selector,
  },
  serviceDiscoveryPort: {
    flag: "--service-discovery-port",
    arg: "<port>",
    description: "With --service-discovery: the workers' port on each pod's IP (SGLang's default).",
    default: 80,
    parse: integer(1, 65535),
  },
  serviceDiscoveryNamespace: {
    flag: "--service-discovery-namespace",
    arg: "<namespace>",
    description:
      "With --service-discovery: the namespace whose pods are watched. Empty = every namespace (needs a ClusterRole).",
    default: "",
    parse: namespace,
  },
  prefillSelector: {
    flag: "--prefill-selector",
    arg: "<key=value...>",
    description:
      "With --service-discovery and disaggregation: the labels of prefill pods; a prefill pod's bootstrap port is its annotation sglang.ai/bootstrap-port (none without it).",
    default: [],
    parse: selector,
  },
  decodeSelector: {
    flag: "--decode-selector",
    arg: "<key=value...>",
    description:
      "With --service-discovery and disaggregation: the labels of decode pods (a pod matching both selectors is a prefill worker, as in SGLang).",
    default: [],
    parse: selector,
  },
  kubeconfig: {
    flag: "--kubeconfig",
    arg: "<path>",
    description:
      "With --service-discovery: the kubeconfig file to reach the API server with. Empty = the pod's service account when running in a cluster, else $KUBECONFIG or ~/.kube/config.",
    default: "",
    parse: (raw) => raw.trim(),
  },
});

/** The disaggregation switches the checks below read (src/disaggregation/settings.ts owns them). */
interface PdSwitches {
  pdDisaggregation: boolean;
  vllmPdDisaggregation: boolean;
}

const pdOn = (s: PdSwitches) => s.pdDisaggregation || s.vllmPdDisaggregation;

/**
 * Checks across the flags, as SGLang's router pairs them (service_discovery.rs `should_include`):
 * PD mode watches --prefill-selector and --decode-selector, regular mode --selector. Where SGLang
 * would watch nothing and only warn, the router refuses to start, naming the missing flag.
 */
export function validateKubernetesSettings(s: KubernetesDiscoverySettings & PdSwitches): void {
  const pdSelectors = s.prefillSelector.length > 0 || s.decodeSelector.length > 0;
  if (pdSelectors && !pdOn(s)) {
    throw new ConfigError(
      s.prefillSelector.length > 0 ? "--prefill-selector" : "--decode-selector",
      "needs --pd-disaggregation (SGLang) or --vllm-pd-disaggregation (vLLM)",
    );
  }
  if (!s.serviceDiscovery) return;
  if (pdOn(s) && !pdSelectors) {
    throw new ConfigError(
      "--service-discovery",
      "with disaggregation needs --prefill-selector key=value and --decode-selector key=value: the labels of the prefill and decode pods",
    );
  }
  if (!pdOn(s) && s.selector.length === 0) {
    throw new ConfigError(
      "--service-discovery",
      "needs --selector key=value: the labels of the worker pods",
    );
  }
}

/** Flags given that change nothing (SGLang ignores them too), one line each. */
export function kubernetesWarnings(s: KubernetesDiscoverySettings & PdSwitches): string[] {
  if (s.selector.length === 0) return [];
  if (!s.serviceDiscovery) return ["--selector is used only with --service-discovery; ignored"];
  if (pdOn(s)) {
    return [
      "--selector is not used with disaggregation (the workers are prefill or decode pods: --prefill-selector, --decode-selector); ignored",
    ];
  }
  return [];
}

/** What the Kubernetes source is started with. */
export function kubernetesDiscoveryOptions(
  s: KubernetesDiscoverySettings & PdSwitches,
): KubernetesDiscoveryOptions {
  const pd = pdOn(s);
  return {
    // A pod matching both PD selectors is a prefill worker (SGLang's PodInfo::from_pod).
    pools: pd
      ? [
          ...(s.prefillSelector.length > 0
            ? [{ selector: s.prefillSelector, type: "prefill" as const }]
            : []),
          ...(s.decodeSelector.length > 0
            ? [{ selector: s.decodeSelector, type: "decode" as const }]
            : []),
        ]
      : [{ selector: s.selector, type: "regular" as const }],
    port: s.serviceDiscoveryPort,
    namespace: s.serviceDiscoveryNamespace,
    kubeconfig: s.kubeconfig,
  };
}
