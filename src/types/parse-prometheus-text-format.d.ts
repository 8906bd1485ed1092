// The package ships no types; this is the shape of what it returns (see its README).
declare module "parse-prometheus-text-format" {
  export interface ParsedMetric {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  export interface ParsedFamily {
    name: string;
    help: string;
    type: string;
    metrics: ParsedMetric[];
  }
  export default function parsePrometheusTextFormat(text: string): ParsedFamily[];
}
