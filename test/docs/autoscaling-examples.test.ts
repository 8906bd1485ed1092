import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { type SimWorker, startSimWorker } from "../../sim/worker.js";
import type { RunningRouter } from "../../src/server.js";
import { validateSchema } from "../helpers/openapi-schema.js";
import { startTestRouter } from "../helpers/router.js";

const ROOT = new URL("../../", import.meta.url).pathname;
const page = readFileSync(`${ROOT}docs/kubernetes.md`, "utf8");
const section = page.slice(page.indexOf("## Autoscaling the workers"));
// biome-ignore lint/suspicious/noExplicitAny: manifests are plain YAML documents
const manifests: any[] = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => parse(m[1]!));
const byKind = (kind: string) => manifests.find((m) => m?.kind === kind);

// The published schemas, vendored as test data (their source is named in each file).
const kedaCrd = parse(readFileSync(`${ROOT}test/docs/schemas/keda.sh_scaledobjects.yaml`, "utf8"));
const hpaApi = JSON.parse(
  readFileSync(`${ROOT}test/docs/schemas/autoscaling-v2-hpa.extract.json`, "utf8"),
);
const metricNames = [
  ...readFileSync(`${ROOT}src/admission/fleet-capacity.ts`, "utf8").matchAll(
    /name: "(radixgate_fleet_\w+)"/g,
  ),
].map((m) => m[1]);

describe("docs/kubernetes.md autoscaling examples", () => {
  it("the KEDA ScaledObject is valid against KEDA's published CRD and queries a metric the router serves", () => {
    const scaled = byKind("ScaledObject");
    const [group, version] = String(scaled.apiVersion).split("/");
    expect(group).toBe(kedaCrd.spec.group);
    const served = kedaCrd.spec.versions.find((v: { name: string }) => v.name === version);
    expect(served).toBeDefined();
    const schema = served.schema.openAPIV3Schema;
    expect(validateSchema(scaled, schema, schema)).toEqual([]);
    const trigger = scaled.spec.triggers[0];
    expect(trigger.type).toBe("prometheus");
    expect(metricNames).toContain(/(radixgate_fleet_\w+)/.exec(trigger.metadata.query)?.[1]);
  });

  it("the HPA is valid against the Kubernetes autoscaling/v2 schema and names a metric the router serves", () => {
    const hpa = byKind("HorizontalPodAutoscaler");
    expect(hpa.apiVersion).toBe("autoscaling/v2");
    const schema = {
      $ref: "#/components/schemas/io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler",
    };
    expect(validateSchema(hpa, schema, hpaApi)).toEqual([]);
    expect(metricNames).toContain(hpa.spec.metrics[0].external.metric.name);
  });

  it("the validator refuses what the schemas refuse (a typo, a missing field, a wrong type)", () => {
    const scaled = structuredClone(byKind("ScaledObject"));
    scaled.spec.trigers = scaled.spec.triggers;
    delete scaled.spec.triggers;
    scaled.spec.maxReplicaCount = "16";
    const schema = kedaCrd.spec.versions[0].schema.openAPIV3Schema;
    const errors = validateSchema(scaled, schema, schema);
    expect(errors.join("\n")).toMatch(/unknown field trigers/);
    expect(errors.join("\n")).toMatch(/missing required triggers/);
    expect(errors.join("\n")).toMatch(/maxReplicaCount: expected an integer/);
    const hpa = structuredClone(byKind("HorizontalPodAutoscaler"));
    delete hpa.spec.maxReplicas;
    hpa.spec.metrics[0].external.target.averageValue = { bad: true };
    const root = { $ref: "#/components/schemas/io.k8s.api.autoscaling.v2.HorizontalPodAutoscaler" };
    expect(validateSchema(hpa, root, hpaApi).join("\n")).toMatch(/maxReplicas[\s\S]*averageValue/);
  });

  describe("against what a running router's /metrics exposes", () => {
    let worker: SimWorker;
    let router: RunningRouter;
    let exposed: { name: string; labels: Record<string, string> }[] = [];
    beforeAll(async () => {
      worker = await startSimWorker({ id: "w", timeScale: 0 });
      router = await startTestRouter({ workerUrls: [worker.url], fleetSignalIntervalSecs: 0 });
      router.context.capacity.sample();
      const text = await (await fetch(`${router.url}/metrics`)).text();
      exposed = [...text.matchAll(/^(radixgate_fleet_\w+)(?:\{([^}]*)\})? \S+$/gm)].map((m) => ({
        name: m[1]!,
        labels: Object.fromEntries(
          [...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
        ),
      }));
    });
    afterAll(async () => {
      await router?.stop(100);
      await worker?.close();
    });
    const served = (name: string, labels: Record<string, string>) =>
      exposed.some(
        (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
      );

    it("the KEDA query selects a series the router serves (name and label matchers)", () => {
      const query = String(byKind("ScaledObject").spec.triggers[0].metadata.query);
      const selector = /(radixgate_fleet_\w+)\{([^}]*)\}/.exec(query);
      expect(selector).not.toBeNull();
      const labels = Object.fromEntries(
        [...selector![2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
      );
      expect(served(selector![1]!, labels)).toBe(true);
      // The query aggregates over replicas into one value: max(...) around the selector.
      expect(query).toMatch(/^max\(radixgate_fleet_\w+\{[^}]*\}\)$/);
    });

    it("the HPA's external metric and its label selector match a series the router serves", () => {
      const metric = byKind("HorizontalPodAutoscaler").spec.metrics[0].external.metric;
      expect(served(metric.name, metric.selector?.matchLabels ?? {})).toBe(true);
      // A selector naming a label value the router never sets would match nothing.
      expect(served(metric.name, { model: "no such model" })).toBe(false);
    });
  });
});
