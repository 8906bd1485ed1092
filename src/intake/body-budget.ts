import { RouterError } from "../errors.js";

/**
 * One memory budget for every request body buffered at once (--max-body-buffer-bytes). A body is
 * held from its first byte until its request ends (a retry sends it again), so the budget bounds
 * the router's body memory whatever the number of clients. Bytes are counted as they arrive, never
 * from a declared Content-Length: a client declaring 64 MiB and sending 500 bytes a second holds
 * 500 bytes a second, not 64 MiB. One client address holds at most `maxPerClient` of it
 * (--max-body-buffer-bytes-per-client), so a few sockets from one place cannot take it all.
 */
export class BodyBudget {
  private used = 0;
  /** Bytes held per client address; an address leaves the map when it holds nothing. */
  private readonly byClient = new Map<string, number>();

  /** `maxBytes` 0 = no budget; `maxPerClient` 0 = no per-address bound. */
  constructor(
    readonly maxBytes: number,
    readonly maxPerClient = 0,
  ) {}

  get inUse(): number {
    return this.used;
  }

  /** What one client address holds now. */
  heldBy(client: string): number {
    return this.byClient.get(client) ?? 0;
  }

  /** A lease for one request from `client` (its address); release it when the request ends. */
  lease(client?: string): BodyLease {
    return new BodyLease(this, client === undefined ? undefined : clientKey(client));
  }

  /** @internal Which bound refuses `bytes` more for `client`, or undefined when they fit. */
  tryTake(bytes: number, client: string | undefined): "budget" | "client" | undefined {
    if (this.maxBytes > 0 && this.used + bytes > this.maxBytes) return "budget";
    const held = client === undefined ? 0 : this.heldBy(client);
    if (client !== undefined && this.maxPerClient > 0 && held + bytes > this.maxPerClient) {
      return "client";
    }
    this.used += bytes;
    if (client !== undefined) this.byClient.set(client, held + bytes);
    return undefined;
  }

  /** @internal */
  give(bytes: number, client: string | undefined): void {
    this.used -= bytes;
    if (client === undefined) return;
    const left = this.heldBy(client) - bytes;
    if (left > 0) this.byClient.set(client, left);
    else this.byClient.delete(client);
  }
}

/** An IPv4 client seen through an IPv6 socket counts as the same address. */
function clientKey(address: string): string {
  return address.startsWith("::ffff:") ? address.slice(7) : address;
}

/** What one request holds of the budget; grows with its body, released once. */
export class BodyLease {
  private held = 0;
  private released = false;

  constructor(
    private readonly budget: BodyBudget,
    private readonly client: string | undefined,
  ) {}

  /** Makes the lease cover `total` bytes; throws body_buffer_full when a bound cannot. */
  cover(total: number): void {
    if (this.released || total <= this.held) return;
    const refused = this.budget.tryTake(total - this.held, this.client);
    if (refused === "budget") {
      throw new RouterError(
        "body_buffer_full",
        `The router is buffering its limit of request bodies (--max-body-buffer-bytes ${this.budget.maxBytes}); retry shortly.`,
      );
    }
    if (refused === "client") {
      throw new RouterError(
        "body_buffer_full",
        `Request bodies from your address already hold the router's limit per client (--max-body-buffer-bytes-per-client ${this.budget.maxPerClient}); retry when one of them ends.`,
      );
    }
    this.held = total;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.held, this.client);
    this.held = 0;
  }
}
