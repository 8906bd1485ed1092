/**
 * Issue 25 item 5: the Kubernetes example (docs/kubernetes/radixgate.yaml) is one that works: its
 * router arguments parse into --service-discovery in the namespace its RBAC grants, its Role lets
 * the Deployment's service account list and watch pods, and its probes ask paths the router
 * serves, with the answers the page promises.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import { parseArgv } from "../../src/cli-options.js";
import { flagValues } from "../../src/config.js";
import type { RunningRouter } from "../../src/server.js";
import { withoutRadixgateEnv } from "../helpers/clean-env.js";
import { startTestRouter } from "../helpers/router.js";

const ROOT = new URL("../../", import.meta.url).pathname;
// biome-ignore lint/suspicious/noExplicitAny: manifests are plain YAML documents
type Manifest = any;

const manifests: Manifest[] = parseAllDocuments(
  readFileSync(`${ROOT}docs/kubernetes/radixgate.yaml`, "utf8"),
)
  .map((d) => d.toJS())
  .filter((d) => d !== null);
const byKind = (kind: string): Manifest => manifests.find((m) => m.kind === kind);
const deployment = byKind("Deployment");
const container = deployment.spec.template.spec.containers[0];

interface FlagView {
  serviceDiscovery: boolean;
  selector: string[];
  serviceDiscoveryNamespace: string;
  port: number;
  shutdownGraceSecs: number;
}

function parse(argv: string[]) {
  return withoutRadixgateEnv(() => {
    // The configuration by setting name, in the flags' units.
    const parsed = parseArgv(argv);
    return { ...parsed, config: flagValues(parsed.config) as unknown as FlagView };
  });
}

describe("docs/kubernetes/radixgate.yaml", () => {
  it("has the ServiceAccount, Role, RoleBinding, Deployment and Service", () => {
    expect(manifests.map((m) => m.kind).sort()).toEqual(
      ["Deployment", "Role", "RoleBinding", "Service", "ServiceAccount"].sort(),
    );
  });

  it("the router's arguments parse: --service-discovery in the Role's namespace", () => {
    const { config, warnings } = parse(container.args);
    expect(warnings).toEqual([]);
    expect(config.serviceDiscovery).toBe(true);
    expect(config.selector.length).toBeGreaterThan(0);
    expect(config.serviceDiscoveryNamespace).toBe(byKind("Role").metadata.namespace);
    expect(String(config.port)).toBe(String(container.ports[0].containerPort));
    // The pod is given time to drain: preStop plus the router's grace fit in the pod's.
    const preStop = Number(container.lifecycle.preStop.exec.command[1]);
    expect(preStop + config.shutdownGraceSecs).toBeLessThan(
      deployment.spec.template.spec.terminationGracePeriodSeconds,
    );
  });

  it("the Role lets the Deployment's service account list and watch pods", () => {
    const role = byKind("Role");
    const binding = byKind("RoleBinding");
    const rule = role.rules.find((r: Manifest) => r.resources.includes("pods"));
    expect(rule.apiGroups).toEqual([""]);
    expect(rule.verbs).toEqual(expect.arrayContaining(["list", "watch"]));
    expect(binding.roleRef).toMatchObject({ kind: "Role", name: role.metadata.name });
    expect(binding.subjects).toContainEqual(
      expect.objectContaining({
        kind: "ServiceAccount",
        name: deployment.spec.template.spec.serviceAccountName,
      }),
    );
    expect(byKind("ServiceAccount").metadata.name).toBe(
      deployment.spec.template.spec.serviceAccountName,
    );
  });

  describe("its probes, asked of a running router", () => {
    let router: RunningRouter;
    let worker: SimWorker;
    beforeAll(async () => {
      worker = await startSimWorker({ id: "w" });
      router = await startTestRouter();
    });
    afterAll(async () => {
      await router?.stop(100);
      await worker?.close();
    });
    const ask = (path: string) => fetch(`${router.url}${path}`).then((r) => r.status);

    it("liveness answers 200 with no workers; readiness 503 until a worker is available", async () => {
      expect(await ask(container.livenessProbe.httpGet.path)).toBe(200);
      expect(await ask(container.readinessProbe.httpGet.path)).toBe(503);
      router.context.registry.add(worker.url);
      expect(await ask(container.readinessProbe.httpGet.path)).toBe(200);
    });
  });
});
