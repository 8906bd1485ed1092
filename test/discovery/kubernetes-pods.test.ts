import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { podWorker } from "../../src/discovery/kubernetes-pods.js";
import {
  formatLabelSelector,
  matchesLabels,
  parseLabelSelector,
} from "../../src/discovery/kubernetes-selector.js";
import { type Pod, recordedPod, setReady } from "../helpers/fake-kube-api.js";

const selector = parseLabelSelector(["app=sglang-sim", "role=worker"]);

describe("label selectors (SGLang's --selector key=value ...)", () => {
  it("takes space- or comma-separated pairs, all of which must match", () => {
    expect(formatLabelSelector(parseLabelSelector(["app=a role=b"]))).toBe("app=a,role=b");
    expect(formatLabelSelector(parseLabelSelector(["app=a,role=b", "x.io/tier=gpu"]))).toBe(
      "app=a,role=b,x.io/tier=gpu",
    );
    expect(matchesLabels(selector, { app: "sglang-sim", role: "worker", extra: "1" })).toBe(true);
    expect(matchesLabels(selector, { app: "sglang-sim" })).toBe(false);
    // An empty selector matches nothing (SGLang's matches_selector).
    expect(matchesLabels(parseLabelSelector([]), { app: "x" })).toBe(false);
  });

  it("refuses what is not a key=value pair, naming it", () => {
    expect(() => parseLabelSelector(["app"])).toThrow(/"app" is not a label key=value pair/);
    expect(() => parseLabelSelector(["=x"])).toThrow(/not a label key=value pair/);
    expect(() => parseLabelSelector(["app=a b"])).toThrow(/"b"/);
    expect(() => parseLabelSelector(["app=has space?"])).toThrow();
    expect(() => parseLabelSelector(["app=a", "app=b"])).toThrow(/given twice/);
  });

  it("round-trips: a parsed selector formats to pairs that parse to the same selector", () => {
    const name = fc.stringMatching(/^[a-z0-9]([a-z0-9._-]{0,20}[a-z0-9])?$/);
    fc.assert(
      fc.property(fc.dictionary(name, fc.oneof(name, fc.constant(""))), (labels) => {
        const pairs = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
        const parsed = parseLabelSelector(pairs);
        expect(parseLabelSelector([formatLabelSelector(parsed)])).toEqual(parsed);
        expect(matchesLabels(parsed, labels)).toBe(pairs.length > 0);
      }),
    );
  });
});

describe("a pod's worker (SGLang's PodInfo: Running and Ready, pod IP + --service-discovery-port)", () => {
  const worker = (pod: Pod) => podWorker(pod, selector, "regular", 30000);

  it("a running, ready pod matching the selector is http://POD_IP:PORT", () => {
    expect(worker(recordedPod("p", "10.244.3.17"))).toEqual({
      url: "http://10.244.3.17:30000",
      role: { type: "regular", bootstrapPort: null },
    });
    expect(worker(recordedPod("p", "fd00::17"))?.url).toBe("http://[fd00::17]:30000");
  });

  it("takes no traffic when not ready, not running, without an IP, terminating, or not matching", () => {
    expect(worker(setReady(recordedPod("p", "10.0.0.1"), false))).toBeUndefined();
    const pending = recordedPod("p", "10.0.0.1");
    pending.status.phase = "Pending";
    expect(worker(pending)).toBeUndefined();
    const noIp = recordedPod("p", "10.0.0.1");
    delete noIp.status.podIP;
    expect(worker(noIp)).toBeUndefined();
    const terminating = recordedPod("p", "10.0.0.1");
    terminating.metadata.deletionTimestamp = "2026-11-25T21:00:00Z";
    expect(worker(terminating)).toBeUndefined();
    expect(worker(recordedPod("p", "10.0.0.1", { labels: { app: "other" } }))).toBeUndefined();
  });

  it("a prefill pod's bootstrap port is its sglang.ai/bootstrap-port annotation, when it is a port", () => {
    const pod = recordedPod("p", "10.0.0.1");
    pod.metadata.annotations = { "sglang.ai/bootstrap-port": "8998" };
    expect(podWorker(pod, selector, "prefill", 30000)).toEqual({
      url: "http://10.0.0.1:30000",
      role: { type: "prefill", bootstrapPort: 8998 },
    });
    pod.metadata.annotations = { "sglang.ai/bootstrap-port": "none" };
    expect(podWorker(pod, selector, "prefill", 30000)?.role.bootstrapPort).toBeNull();
    pod.metadata.annotations = { "sglang.ai/bootstrap-port": "8998" };
    expect(podWorker(pod, selector, "decode", 30000)?.role).toEqual({
      type: "decode",
      bootstrapPort: null,
    });
  });

  it("a pod's radixgate.io/port annotation is the port it serves on; without it, --service-discovery-port", () => {
    const pod = recordedPod("p", "10.0.0.1");
    pod.metadata.annotations = { "radixgate.io/port": "8000" };
    expect(worker(pod)?.url).toBe("http://10.0.0.1:8000");
    for (const bad of ["0", "65536", "http", "80a", ""]) {
      pod.metadata.annotations = { "radixgate.io/port": bad };
      expect(worker(pod)?.url).toBe("http://10.0.0.1:30000");
    }
    pod.metadata.annotations = {};
    expect(worker(pod)?.url).toBe("http://10.0.0.1:30000");
  });
});

describe("the client library is loaded only with --service-discovery", () => {
  it("no file of src/ imports @kubernetes/client-node except the lazy import in kubernetes-client.ts", () => {
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
        e.isDirectory()
          ? files(join(dir, e.name))
          : e.name.endsWith(".ts")
            ? [join(dir, e.name)]
            : [],
      );
    for (const file of files("src")) {
      const text = readFileSync(file, "utf8");
      // `import type` is erased at build; any other static import would load the library.
      const staticImports = text.match(/^import (?!type )[^;]*"@kubernetes\/client-node"/gm) ?? [];
      expect(staticImports, file).toEqual([]);
      if (text.includes('import("@kubernetes/client-node")')) {
        expect(file).toBe(join("src", "discovery", "kubernetes-client.ts"));
      }
    }
  });
});
