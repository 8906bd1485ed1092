import type { Logger } from "../logger.js";

/** One running part of the router: how it starts (optional) and how it stops. */
export interface Service {
  readonly name: string;
  start?(): unknown;
  stop(): unknown;
}

/**
 * The router's services, declared once in start order. `start` runs a service's start and, once
 * it succeeded, remembers its stop; if a start throws, every service started before it is stopped
 * in reverse order and the error goes on, so a failed start leaves nothing running. `stop` stops
 * the started services in reverse order; a stop that throws is logged and the others still stop.
 * Both are the only ways out, so the signal path, a failed start and an error share one list.
 */
export class Lifecycle {
  private readonly started: Service[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly logger: Logger,
    /** Tests: called with each service's name before it starts (a throw fails that step). */
    private readonly beforeStart?: (name: string) => void,
  ) {}

  /** Starts `service`; on failure stops everything started so far, then rethrows. */
  async start<T>(service: Service & { start?(): T }): Promise<Awaited<T> | undefined> {
    if (this.stopping !== undefined)
      throw new Error(`cannot start ${service.name}: the router is stopping`);
    let result: Awaited<T> | undefined;
    try {
      this.beforeStart?.(service.name);
      result = (await service.start?.()) as Awaited<T> | undefined;
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.started.push(service);
    return result;
  }

  /** Remembers a service that is already running (made running by its constructor). */
  async running(service: Service): Promise<void> {
    await this.start({ name: service.name, stop: () => service.stop() });
  }

  /** The names of the services running now, in start order (tests, logs). */
  get names(): string[] {
    return this.started.map((s) => s.name);
  }

  /** Stops every started service, newest first; once (later calls wait for the first). */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      while (this.started.length > 0) {
        const service = this.started.pop() as Service;
        try {
          await service.stop();
        } catch (err) {
          this.logger.error({ err, service: service.name }, "a service failed to stop");
        }
      }
    })();
    return this.stopping;
  }
}
