import { Histogram, type Registry } from "prom-client";

/**
 * A histogram kept under a second, deprecated name (issue 19: a name kept one release for
 * dashboards that still read it) that observes nothing itself: a scrape reads the source's
 * samples and renames them. Why: observing both on every request cost one more prom-client
 * observe per decision, about 1 µs (issue 21's JSON CPU, docs/benchmarks.md).
 */
export class HistogramAlias extends Histogram {
  constructor(
    private readonly source: Histogram,
    private readonly sourceName: string,
    private readonly aliasName: string,
    private readonly aliasHelp: string,
    registers: Registry[],
  ) {
    super({ name: aliasName, help: aliasHelp, registers });
  }

  override async get(): ReturnType<Histogram["get"]> {
    return this.renamed(await this.source.get());
  }

  /** What the registry's text output reads when a metric has it (prom-client registry.js). */
  async getForPromString(): ReturnType<Histogram["get"]> {
    const source = this.source as unknown as { getForPromString(): ReturnType<Histogram["get"]> };
    return this.renamed(await source.getForPromString());
  }

  private renamed(
    data: Awaited<ReturnType<Histogram["get"]>>,
  ): Awaited<ReturnType<Histogram["get"]>> {
    const from = this.sourceName;
    const to = this.aliasName;
    return {
      ...data,
      name: to,
      help: this.aliasHelp,
      values: data.values.map((value) =>
        value.metricName?.startsWith(from) === true
          ? { ...value, metricName: to + value.metricName.slice(from.length) }
          : value,
      ),
    };
  }
}
