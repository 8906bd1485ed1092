/**
 * Which process relays the workers' answers: radixgate itself (the default), or nginx in front of
 * it, which asks radixgate where each request goes and relays the tokens natively
 * (docs/data-planes.md).
 */
import { oneOf, text } from "../config-kit/parsers.js";
import { section } from "../config-kit/setting.js";

export type DataPlaneKind = "node" | "nginx";

export interface NginxConfigRows {
  dataPlane: DataPlaneKind;
  /** The nginx binary (a name on PATH or a path). */
  nginxBinary: string;
}

export const NGINX_SETTINGS = section<NginxConfigRows>({
  dataPlane: {
    flag: "--data-plane",
    arg: "<node|nginx>",
    description:
      "Who relays the workers' answers: node = this process; nginx = an nginx it starts and supervises on --host/--port (needs nginx and its njs module), which asks this process where each request goes and relays the tokens itself. Prefill/decode disaggregation needs node.",
    default: "node",
    parse: oneOf(["node", "nginx"] as const),
  },
  nginxBinary: {
    flag: "--nginx-binary",
    arg: "<path>",
    description: "The nginx binary --data-plane nginx starts (a name on PATH or a path).",
    default: "nginx",
    parse: text,
  },
});
