import {
  MAX_OPS_PER_MESSAGE,
  readSiblingMessage,
  type SiblingMemberChange,
  type SiblingMessage,
  type SiblingPending,
} from "./cluster-messages.js";
import type { StateOp } from "./state-op.js";

/** Decisions kept for a process that starts later (a restart after a crash): the newest ones. */
const REPLAY_MAX_OPS = 10_000;
/** ... and at most this many characters of text in all (bounded memory in the primary). */
const REPLAY_MAX_CHARS = 16 * 1024 * 1024;
/** New-prefix claims held at once; past it the oldest is forgotten (it would expire anyway). */
const MAX_CLAIMS = 65_536;
/** Admin-made membership changes kept (the last one per worker URL); past it the oldest goes. */
const MAX_MEMBER_CHANGES = 4096;
/** Longest claim life a process may ask for. */
const MAX_CLAIM_TTL_MS = 600_000;

interface Member {
  send(message: SiblingMessage): void;
  /** Said hello: receives its siblings' messages (before that it is not a router yet). */
  ready: boolean;
}

/**
 * radixgate-cluster's primary, as the hub of its processes' local channel (the processes share
 * routing decisions without Redis, docs/architecture.md "One process per core"):
 *
 * - relays each process's decisions (index ops) and in-flight counts to every other process;
 * - answers new-prefix claims, first come first served, as Redis's `SET NX` does between hosts:
 *   the primary is the one place two processes' claims meet, so they never race;
 * - relays each process's membership changes (every add and remove), and keeps the last one per
 *   worker (bounded), so a process that starts later routes to the same workers;
 * - keeps the newest decisions (bounded) and every process's last counts, for a process that
 *   starts later (one restarted after a crash), which gets them before it serves;
 * - tells the others when a process is gone, so that its counts stop weighing.
 *
 * It keeps no index and routes nothing: its work per decision is one parse and one send per
 * sibling. Transport-free (the caller gives each member's `send`), so tests drive it directly.
 */
export class SiblingHub {
  private readonly members = new Map<number, Member>();
  private readonly loads = new Map<number, SiblingLoad>();
  /** The replay ring: ops in arrival order, with their total text length. */
  private readonly recent: StateOp[] = [];
  private recentHead = 0;
  private recentChars = 0;
  /** Worker URL → the last membership change for it; insertion order = age. */
  private readonly memberChanges = new Map<string, SiblingMemberChange>();
  /** key → claim value and its expiry (epoch ms); insertion order = age. */
  private readonly claims = new Map<string, { value: string; expires: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A process started (not yet a router: it says hello once it is ready to apply). */
  add(id: number, send: (message: SiblingMessage) => void): void {
    this.members.set(id, { send, ready: false });
  }

  /** A process exited: its counts no longer weigh anywhere. */
  remove(id: number): void {
    if (!this.members.delete(id)) return;
    const hadLoad = this.loads.delete(id);
    if (hadLoad) this.broadcast(id, { rg: "sib", t: "gone", from: id });
  }

  /** A message from process `id`; anything that is not one of ours is ignored. */
  receive(id: number, raw: unknown): void {
    const member = this.members.get(id);
    const message = readSiblingMessage(raw);
    if (member === undefined || message === undefined) return;
    switch (message.t) {
      case "hello":
        this.replayTo(member);
        member.ready = true;
        break;
      case "ops": {
        const { counts, pending } = message;
        if (counts !== undefined) this.keepLoad(id, { counts, pending });
        if (message.ops.length === 0 && counts === undefined) return;
        for (const op of message.ops) this.keep(op);
        this.broadcast(id, {
          rg: "sib",
          t: "ops",
          from: id,
          ops: message.ops,
          ...(counts !== undefined ? { counts } : {}),
          ...(pending !== undefined ? { pending } : {}),
        });
        break;
      }
      case "load":
        this.keepLoad(id, { counts: message.counts, pending: message.pending });
        this.broadcast(id, loadMessage(id, { counts: message.counts, pending: message.pending }));
        break;
      case "member":
        // Moved to the end: the replay gives the changes in the order they were last made.
        this.memberChanges.delete(message.change.url);
        this.memberChanges.set(message.change.url, message.change);
        for (const url of this.memberChanges.keys()) {
          if (this.memberChanges.size <= MAX_MEMBER_CHANGES) break;
          this.memberChanges.delete(url);
        }
        this.broadcast(id, { rg: "sib", t: "member", from: id, change: message.change });
        break;
      case "claim":
        member.send({
          rg: "sib",
          t: "claimed",
          n: message.n,
          value: this.claim(message.key, message.value, message.ttlMs),
        });
        break;
      default:
        break;
    }
  }

  /**
   * Process `id` read its backlog after `dropped` messages to it were dropped: it gets its
   * siblings' current counts again, and the number it missed (its metric counts them).
   */
  caughtUp(id: number, dropped: number): void {
    const member = this.members.get(id);
    if (member === undefined || !member.ready) return;
    for (const [from, load] of this.loads) {
      if (from !== id) member.send(loadMessage(from, load));
    }
    member.send({ rg: "sib", t: "missed", n: dropped });
  }

  /** Claims held now (tests, and the bound). */
  get claimCount(): number {
    return this.claims.size;
  }

  /** Decisions kept for replay. */
  get recentCount(): number {
    return this.recent.length - this.recentHead;
  }

  /** SET NX PX, then GET: the claim's value, this proposal's when there was none alive. */
  private claim(key: string, value: string, ttlMs: number): string {
    const now = this.now();
    const held = this.claims.get(key);
    if (held !== undefined && held.expires > now) return held.value;
    if (held !== undefined) this.claims.delete(key);
    // Expired claims at the old end go first; past the bound, the oldest live one too.
    for (const [k, c] of this.claims) {
      if (c.expires > now && this.claims.size < MAX_CLAIMS) break;
      this.claims.delete(k);
    }
    this.claims.set(key, { value, expires: now + Math.min(ttlMs, MAX_CLAIM_TTL_MS) });
    return value;
  }

  private keepLoad(id: number, load: SiblingLoad): void {
    const empty =
      Object.keys(load.counts).length === 0 &&
      (load.pending === undefined || Object.keys(load.pending).length === 0);
    if (empty) this.loads.delete(id);
    else this.loads.set(id, load);
  }

  private broadcast(from: number, message: SiblingMessage): void {
    for (const [id, member] of this.members) {
      if (id !== from && member.ready) member.send(message);
    }
  }

  private keep(op: StateOp): void {
    this.recent.push(op);
    this.recentChars += opChars(op);
    while (
      this.recent.length - this.recentHead > REPLAY_MAX_OPS ||
      this.recentChars > REPLAY_MAX_CHARS
    ) {
      const old = this.recent[this.recentHead] as StateOp;
      this.recentChars -= opChars(old);
      this.recentHead += 1;
    }
    // Compact now and then, so the array does not grow with every op ever seen.
    if (this.recentHead > 4096 && this.recentHead * 2 > this.recent.length) {
      this.recent.splice(0, this.recentHead);
      this.recentHead = 0;
    }
  }

  /** Admin-made membership changes kept for replay. */
  get memberChangeCount(): number {
    return this.memberChanges.size;
  }

  /**
   * What a starting process needs: the membership changes (first: the decisions that follow
   * name those workers), the newest decisions, its siblings' counts, then "ready".
   */
  private replayTo(member: Member): void {
    for (const change of this.memberChanges.values())
      member.send({ rg: "sib", t: "member", change });
    for (let i = this.recentHead; i < this.recent.length; i += MAX_OPS_PER_MESSAGE) {
      const end = Math.min(i + MAX_OPS_PER_MESSAGE, this.recent.length);
      member.send({ rg: "sib", t: "ops", ops: this.recent.slice(i, end) });
    }
    for (const [from, load] of this.loads) member.send(loadMessage(from, load));
    member.send({ rg: "sib", t: "ready" });
  }
}

/** A process's last counts and queued prefill, as the primary keeps them. */
interface SiblingLoad {
  readonly counts: Record<string, number>;
  readonly pending: SiblingPending | undefined;
}

function loadMessage(from: number, load: SiblingLoad): SiblingMessage {
  const { counts, pending } = load;
  return { rg: "sib", t: "load", from, counts, ...(pending !== undefined ? { pending } : {}) };
}

function opChars(op: StateOp): number {
  return op.kind === "insert" || op.kind === "truncate" ? op.text.length : 0;
}
