/** --scheduler-config: scheduling profiles from a file (router-policy.ts builds the policy). */
import type { Parser } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";
import { ConfigError } from "../errors.js";
import { SchedulerConfigError } from "./config-path.js";
import { loadSchedulerConfig } from "./scheduler-config.js";

export interface SchedulingConfig {
  /** A file of scheduling profiles ("" = none); its first profile routes. */
  schedulerConfig: string;
}

/** A scheduler config file, built once to check it (the router builds it again at start). */
const schedulerConfigFile: Parser<string> = (raw, flag) => {
  if (raw.trim() === "") return "";
  try {
    loadSchedulerConfig(raw);
  } catch (err) {
    if (err instanceof SchedulerConfigError) throw new ConfigError(flag, err.message);
    throw err;
  }
  return raw;
};

export const SCHEDULING_SETTINGS = section<SchedulingConfig>({
  schedulerConfig: {
    flag: "--scheduler-config",
    arg: "<file>",
    description:
      "Scheduling profiles from a YAML or JSON file in the shape of GIE's EndpointPickerConfig (plugins: [{type, name, parameters}], schedulingProfiles: [{name, plugins: [{pluginRef, weight}]}]; docs/scheduling.md); its first profile routes instead of --policy. Checked at start: an error names the path in the file. Empty = none.",
    default: "",
    parse: schedulerConfigFile,
  },
});
