import { readFileSync, statSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { checkNesting } from "../watched-file/nesting.js";
import {
  child,
  describe,
  list,
  number,
  object,
  onlyKeys,
  Parameters,
  SchedulerConfigError,
  text,
} from "./config-path.js";
import type { RandomSource } from "./options.js";
import { MaxScorePicker } from "./pickers.js";
import type { Filter, Picker, PluginEnv, Scorer } from "./plugin.js";
import {
  ALL_TYPES,
  FILTER_TYPES,
  IGNORED_TYPES,
  PICKER_TYPES,
  SCORER_TYPES,
} from "./plugin-types.js";
import { SchedulerProfile, type WeightedScorer } from "./profile.js";

/**
 * --scheduler-config: named plugins with parameters, and profiles that list them with weights,
 * in the shape of the Gateway API Inference Extension's EndpointPickerConfig
 * (kubernetes-sigs/gateway-api-inference-extension, site-src/guides/epp-configuration/
 * config-text.md; apiVersion inference.networking.x-k8s.io/v1alpha1):
 *
 *   plugins:            [{type, name?, parameters?}]   name defaults to the type
 *   schedulingProfiles: [{name, plugins: [{pluginRef, weight?}]}]
 *
 * A profile lists its filters (in order), its scorers (weight ≥ 0, 1 when left out, as GIE) and at
 * most one picker (max-score when none, as GIE). The first profile routes (GIE's
 * single-profile-handler). YAML or JSON (JSON is YAML).
 */

/** The largest configuration file read: a scheduler config is a few hundred bytes. */
const MAX_FILE_BYTES = 1024 * 1024;

type Built =
  | { stage: "filter"; plugin: Filter }
  | { stage: "scorer"; plugin: Scorer }
  | { stage: "picker"; plugin: Picker };

/** Every profile of a parsed document, in order; throws SchedulerConfigError naming the path. */
export function buildProfiles(document: unknown, env: PluginEnv): SchedulerProfile[] {
  const root = object(document, "");
  onlyKeys(root, ["apiVersion", "kind", "plugins", "schedulingProfiles"], "");
  if (root.kind !== undefined && root.kind !== "EndpointPickerConfig") {
    throw new SchedulerConfigError(
      "kind",
      `must be EndpointPickerConfig, got ${describe(root.kind)}`,
    );
  }
  const plugins = buildPlugins(root.plugins, env);
  const profiles = list(root.schedulingProfiles, "schedulingProfiles");
  if (profiles.length === 0) {
    throw new SchedulerConfigError("schedulingProfiles", "must list at least one profile");
  }
  const names = new Set<string>();
  return profiles.map((raw, i) => {
    const path = child("schedulingProfiles", i);
    const profile = object(raw, path);
    onlyKeys(profile, ["name", "plugins"], path);
    const name = text(profile.name, child(path, "name"));
    if (names.has(name))
      throw new SchedulerConfigError(child(path, "name"), `"${name}" is listed twice`);
    names.add(name);
    return buildProfile(name, profile.plugins, plugins, child(path, "plugins"));
  });
}

function buildPlugins(raw: unknown, env: PluginEnv): Map<string, Built> {
  const plugins = new Map<string, Built>();
  const items = list(raw, "plugins");
  items.forEach((item, i) => {
    const path = child("plugins", i);
    const spec = object(item, path);
    onlyKeys(spec, ["type", "name", "parameters"], path);
    const type = text(spec.type, child(path, "type"));
    const name = spec.name === undefined ? type : text(spec.name, child(path, "name"));
    if (plugins.has(name)) {
      throw new SchedulerConfigError(child(path, "name"), `"${name}" names two plugins`);
    }
    const params = new Parameters(spec.parameters, child(path, "parameters"));
    if (IGNORED_TYPES.has(type)) return;
    const built = make(type, name, params, env, child(path, "type"));
    params.done();
    plugins.set(name, built);
  });
  return plugins;
}

function make(type: string, name: string, p: Parameters, env: PluginEnv, path: string): Built {
  const filter = FILTER_TYPES[type];
  if (filter !== undefined) return { stage: "filter", plugin: filter(name, p, env) };
  const scorer = SCORER_TYPES[type];
  if (scorer !== undefined) return { stage: "scorer", plugin: scorer(name, p, env) };
  const picker = PICKER_TYPES[type];
  if (picker !== undefined) return { stage: "picker", plugin: picker(name, p, env) };
  throw new SchedulerConfigError(
    path,
    `unknown plugin type "${type}" (known: ${ALL_TYPES.join(", ")})`,
  );
}

function buildProfile(
  name: string,
  raw: unknown,
  plugins: Map<string, Built>,
  path: string,
): SchedulerProfile {
  const filters: Filter[] = [];
  const scorers: WeightedScorer[] = [];
  let picker: Picker | undefined;
  const used = new Set<string>();
  list(raw, path).forEach((item, j) => {
    const at = child(path, j);
    const ref = object(item, at);
    onlyKeys(ref, ["pluginRef", "weight"], at);
    const pluginRef = text(ref.pluginRef, child(at, "pluginRef"));
    const built = plugins.get(pluginRef);
    if (built === undefined) {
      const known = [...plugins.keys()];
      throw new SchedulerConfigError(
        child(at, "pluginRef"),
        `no plugin named "${pluginRef}" in plugins (${known.length === 0 ? "none" : known.join(", ")})`,
      );
    }
    if (used.has(pluginRef))
      throw new SchedulerConfigError(child(at, "pluginRef"), `"${pluginRef}" is listed twice`);
    used.add(pluginRef);
    if (built.stage !== "scorer" && ref.weight !== undefined) {
      throw new SchedulerConfigError(
        child(at, "weight"),
        `only scorers take a weight; "${pluginRef}" is a ${built.stage}`,
      );
    }
    if (built.stage === "filter") filters.push(built.plugin);
    else if (built.stage === "scorer") {
      const weight =
        ref.weight === undefined ? 1 : number(ref.weight, child(at, "weight"), { min: 0 });
      scorers.push({ scorer: built.plugin, weight });
    } else {
      if (picker !== undefined) {
        throw new SchedulerConfigError(
          child(at, "pluginRef"),
          `a profile takes one picker; "${picker.name}" is already its picker`,
        );
      }
      picker = built.plugin;
    }
  });
  return new SchedulerProfile(name, {
    filters,
    scorers,
    picker: picker ?? new MaxScorePicker("max-score-picker"),
  });
}

/** Parses YAML or JSON text; a syntax error names the line. */
export function parseSchedulerConfig(source: string): unknown {
  try {
    checkNesting(source);
    return parseYaml(source, { prettyErrors: true, maxAliasCount: 100 });
  } catch (err) {
    throw new SchedulerConfigError(
      "",
      `not valid YAML or JSON: ${(err as Error).message.split("\n")[0]}`,
    );
  }
}

/**
 * Reads and builds the file's profiles; the first routes. Throws SchedulerConfigError whose
 * message starts with the file and names the path in it.
 */
export function loadSchedulerConfig(
  file: string,
  random: RandomSource = Math.random,
): SchedulerProfile[] {
  let source: string;
  try {
    if (statSync(file).size > MAX_FILE_BYTES) {
      throw new SchedulerConfigError("", `larger than ${MAX_FILE_BYTES} bytes`);
    }
    source = readFileSync(file, "utf8");
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw withFile(file, err);
    throw new SchedulerConfigError(
      file,
      `cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    );
  }
  try {
    return buildProfiles(parseSchedulerConfig(source), { random });
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw withFile(file, err);
    throw err;
  }
}

function withFile(file: string, err: SchedulerConfigError): SchedulerConfigError {
  return new SchedulerConfigError(err.path === "" ? file : `${file}: ${err.path}`, err.reason);
}
