import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "../logger.js";

export interface RedisLinkOptions {
  /** --state-url (never logged: it may hold a password). */
  url: string;
  /** Limit for one command; a slow Redis fails the command, never a request. */
  commandTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Longest wait between two reconnection attempts. */
  maxBackoffMs?: number;
  /** Limit for one claim (--state-claim-timeout-ms); the claims connection's is this + commandTimeoutMs. */
  claimTimeoutMs?: number;
}

export type LinkListener = (up: boolean) => void;

/**
 * The connections of one replica to the shared Redis: `commands` for writes and short reads,
 * `reader` for the blocking stream reads (a blocked connection cannot serve anything else), and
 * `claims` for the new-prefix claims a request waits for, so that they never queue behind a
 * batch of published decisions.
 *
 * Nothing waits for Redis: the offline queue is off, so a command while disconnected fails at
 * once (the callers keep their own bounded queues), every command has a timeout, and ioredis
 * reconnects in the background with capped, jittered backoff. The link reports each change
 * between up and down once, with one log line, so a long outage does not flood the log.
 */
export class RedisLink {
  readonly commands: Redis;
  readonly reader: Redis;
  readonly claims: Redis;
  private readonly listeners: LinkListener[] = [];
  private wasUp = false;
  private reportedDown = false;
  private closed = false;

  constructor(
    options: RedisLinkOptions,
    private readonly logger: Logger,
  ) {
    const commandTimeout = options.commandTimeoutMs ?? 1000;
    const maxBackoff = options.maxBackoffMs ?? 2000;
    const base: RedisOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      connectTimeout: options.connectTimeoutMs ?? 2000,
      // Reconnect forever, 50 ms doubling up to maxBackoff, with jitter so replicas spread out.
      retryStrategy: (times) =>
        Math.round(Math.min(maxBackoff, 50 * 2 ** Math.min(times, 10)) * (0.5 + Math.random() / 2)),
      lazyConnect: true,
    };
    this.commands = new Redis(options.url, {
      ...base,
      commandTimeout,
      connectionName: "radixgate",
    });
    // XREAD BLOCK holds the reader for up to its block time: its own timeout is longer.
    this.reader = new Redis(options.url, {
      ...base,
      commandTimeout: commandTimeout + READ_BLOCK_MS,
      connectionName: "radixgate-reader",
    });
    // The claim's own timer gives up first (a request never waits longer); ioredis's later one only
    // ends a reply that never comes.
    this.claims = new Redis(options.url, {
      ...base,
      commandTimeout: (options.claimTimeoutMs ?? 0) + commandTimeout,
      connectionName: "radixgate-claims",
    });
    for (const client of [this.commands, this.reader, this.claims]) {
      // Without an error listener ioredis would throw connection errors at the process; the
      // link's state is logged by report() from "ready" and "close".
      client.on("error", () => {});
    }
    this.commands.on("ready", () => this.report(true));
    this.commands.on("close", () => this.report(false));
  }

  /** Starts connecting; resolves once connected or once the first attempt failed (never rejects). */
  async connect(): Promise<boolean> {
    const first = (client: Redis) =>
      client.connect().then(
        () => true,
        () => false,
      );
    const [commands] = await Promise.all([
      first(this.commands),
      first(this.reader),
      first(this.claims),
    ]);
    if (!commands) this.report(false);
    return commands;
  }

  get up(): boolean {
    return this.commands.status === "ready";
  }

  /** Called with true when the link comes up (first time and after every outage), false when it goes down. */
  onChange(listener: LinkListener): void {
    this.listeners.push(listener);
  }

  private report(up: boolean): void {
    if (this.closed) return;
    if (up) {
      if (this.wasUp && !this.reportedDown) return;
      this.logger.info("shared state: connected to Redis");
      this.wasUp = true;
      this.reportedDown = false;
    } else {
      if (this.reportedDown) return;
      this.reportedDown = true;
      this.logger.warn(
        "shared state: Redis unreachable; routing on this replica's own state until it returns",
      );
    }
    for (const listener of this.listeners) listener(up);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.commands.disconnect();
    this.reader.disconnect();
    this.claims.disconnect();
  }
}

/** How long one XREAD waits for new entries before looping. */
export const READ_BLOCK_MS = 500;
