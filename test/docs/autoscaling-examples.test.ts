import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { validateSchema } from "../helpers/openapi-schema.js";

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
});
