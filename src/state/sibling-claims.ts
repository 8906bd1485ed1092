import type { PrefixClaims } from "../index/prefix-claims.js";
import type { SiblingMessage } from "./sibling-messages.js";

/** Claims waiting for the primary at once; past it a request routes on its own choice. */
const MAX_PENDING = 1024;

export interface SiblingClaimsOptions {
  /** How long a request waits for the primary's answer before its own choice stands. */
  timeoutMs: number;
  /** How long a claim lives in the primary. */
  ttlMs: number;
  /** Whether the channel is up now (no claim is tried when it is not). */
  up: () => boolean;
  send: (message: SiblingMessage) => void;
}

/**
 * New-prefix claims between the processes of one radixgate-cluster, answered by the primary
 * (state/sibling-hub.ts), first come first served, as Redis answers them between hosts
 * (state/prefix-claims.ts): one message there and one back, on the local channel. Requests of
 * this process that claim the same prefix while an answer is on its way share it.
 */
export class SiblingClaims implements PrefixClaims {
  private next = 0;
  private readonly waiting = new Map<number, (value: string | undefined) => void>();
  private readonly byKey = new Map<string, Promise<string | undefined>>();

  constructor(private readonly options: SiblingClaimsOptions) {}

  claim(key: string, value: string): Promise<string | undefined> | undefined {
    if (!this.options.up()) return undefined;
    const shared = this.byKey.get(key);
    if (shared !== undefined) return shared;
    if (this.waiting.size >= MAX_PENDING) return undefined;
    const n = this.next;
    this.next = (this.next + 1) % Number.MAX_SAFE_INTEGER;
    let timer: NodeJS.Timeout | undefined;
    const answer = new Promise<string | undefined>((resolve) => {
      this.waiting.set(n, resolve);
      timer = setTimeout(() => resolve(undefined), this.options.timeoutMs);
    }).finally(() => {
      clearTimeout(timer);
      this.waiting.delete(n);
      this.byKey.delete(key);
    });
    this.byKey.set(key, answer);
    this.options.send({ rg: "sib", t: "claim", n, key, value, ttlMs: this.options.ttlMs });
    return answer;
  }

  /** The primary's answer to claim `n` (a late answer, after the timeout, is dropped). */
  answered(n: number, value: string): void {
    this.waiting.get(n)?.(value);
  }

  /** The channel closed: every waiting request goes on with its own choice. */
  cancelAll(): void {
    for (const resolve of this.waiting.values()) resolve(undefined);
  }
}
