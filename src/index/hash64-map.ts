/**
 * A map from 64-bit keys (a kind, two 32-bit words and, for text keys, the text itself) to numbers,
 * kept in insertion order, in typed arrays: the precise index's engine-hash and block-key tables
 * (precise-index.ts). A Map keyed by strings or 53-bit numbers holds a heap object per entry (the
 * string, or a boxed number), and a KV-event batch of 330k blocks made them by the hundred
 * thousand: V8's scavenges copied them while they were young and its full collections marked them
 * after, and one Map growth or rehash of 262k entries held the event loop for up to a second on
 * a loaded machine. Here an entry costs 33 bytes of slots plus 8 of table and no heap object
 * (texts excepted: only keys that are not ints keep theirs).
 *
 * Layout as block-lru.ts, in 16 shards, so that a growth copies and rehashes a sixteenth of the
 * entries (one table of 262k entries took 70-200 ms to grow on a loaded machine): slots in typed
 * arrays (slot 0 is "none"), linked oldest to newest, each stamped with the map's insertion count
 * so the oldest of all shards is found; an open-addressing table of slots (linear probing, at most
 * half full, backward-shift deletion).
 * The home of a key is a seeded mix of its words, so keys chosen by a publisher cannot pile onto
 * one run of the table.
 */
import { fmix32 } from "../hash/fmix32.js";
import { HASH_TEXT } from "./hash-list.js";

const INITIAL_SLOTS = 16;
const NONE = 0;

/** One shard: its own slots, list and table. */
class Shard {
  private kinds = new Uint8Array(INITIAL_SLOTS);
  private his = new Uint32Array(INITIAL_SLOTS);
  private los = new Uint32Array(INITIAL_SLOTS);
  private values = new Float64Array(INITIAL_SLOTS);
  /** When each entry came, across every shard of the map: the oldest of the map is the least. */
  private seqs = new Float64Array(INITIAL_SLOTS);
  /** Towards the newest end; for a free slot, the next free slot. */
  private newer = new Int32Array(INITIAL_SLOTS);
  private older = new Int32Array(INITIAL_SLOTS);
  /** The text of each text key's slot; made with the first one. */
  private texts: (string | undefined)[] | undefined;
  private used = 1;
  private freeHead = NONE;
  private table = new Int32Array(INITIAL_SLOTS * 2);
  private mask = INITIAL_SLOTS * 2 - 1;
  private newest = NONE;
  private oldestSlot = NONE;
  private count = 0;

  constructor(private readonly seed: number) {}

  get size(): number {
    return this.count;
  }

  /** `h` is mix(seed, kind, hi, lo), computed once by the map for the shard and the place. */
  get(h: number, kind: number, hi: number, lo: number, text?: string): number | undefined {
    const slot = this.find(h, kind, hi, lo, text);
    return slot === NONE ? undefined : this.values[slot];
  }

  has(h: number, kind: number, hi: number, lo: number, text?: string): boolean {
    return this.find(h, kind, hi, lo, text) !== NONE;
  }

  /** Seq of the oldest entry; Infinity when empty. */
  get oldestSeq(): number {
    return this.oldestSlot === NONE ? Number.POSITIVE_INFINITY : this.seqs[this.oldestSlot]!;
  }

  /** Sets the key's value; true when the key is new (it becomes the newest, at `seq`). */
  set(
    h: number,
    kind: number,
    hi: number,
    lo: number,
    text: string | undefined,
    value: number,
    seq: number,
  ): boolean {
    const found = this.find(h, kind, hi, lo, text);
    if (found !== NONE) {
      this.values[found] = value;
      return false;
    }
    if ((this.count + 1) * 2 > this.table.length) this.rehash(this.table.length * 2);
    let slot = this.freeHead;
    if (slot !== NONE) {
      this.freeHead = this.newer[slot]!;
    } else {
      if (this.used === this.kinds.length) this.resize(this.kinds.length * 2);
      slot = this.used++;
    }
    this.kinds[slot] = kind;
    this.his[slot] = hi;
    this.los[slot] = lo;
    this.values[slot] = value;
    this.seqs[slot] = seq;
    if (kind === HASH_TEXT) {
      this.texts ??= [];
      this.texts[slot] = text;
    }
    this.older[slot] = this.newest;
    this.newer[slot] = NONE;
    if (this.newest !== NONE) this.newer[this.newest] = slot;
    else this.oldestSlot = slot;
    this.newest = slot;
    this.place(slot);
    this.count++;
    return true;
  }

  /** Removes the key; its value, or undefined when it was not there. */
  delete(h: number, kind: number, hi: number, lo: number, text?: string): number | undefined {
    const slot = this.find(h, kind, hi, lo, text);
    if (slot === NONE) return undefined;
    const value = this.values[slot];
    this.remove(slot);
    return value;
  }

  /** Removes the oldest entry; its value, or undefined when the map is empty. */
  shift(): number | undefined {
    const slot = this.oldestSlot;
    if (slot === NONE) return undefined;
    const value = this.values[slot];
    this.remove(slot);
    return value;
  }

  /**
   * Forgets every entry. The arrays keep their size (a map is bounded by its owner: the precise
   * index's per-worker limit), so that refilling after a reset does not grow them again: the last
   * doubling of a table of 262k entries held the event loop for tens of milliseconds.
   */
  clear(): void {
    this.table.fill(NONE);
    this.texts = undefined;
    this.used = 1;
    this.freeHead = NONE;
    this.newest = NONE;
    this.oldestSlot = NONE;
    this.count = 0;
  }

  /** Calls fn for every entry, oldest first, with its seq. */
  forEach(fn: (entry: Entry) => void) {
    for (let s = this.oldestSlot; s !== NONE; s = this.newer[s]!) {
      fn([
        this.kinds[s]!,
        this.his[s]!,
        this.los[s]!,
        this.texts?.[s],
        this.values[s]!,
        this.seqs[s]!,
      ]);
    }
  }

  /** Places in the slots and in the table (tests: memory stays bounded). */
  get allocated(): { slots: number; table: number } {
    return { slots: this.kinds.length, table: this.table.length };
  }

  private home(kind: number, hi: number, lo: number): number {
    return mix(this.seed, kind, hi, lo) & this.mask;
  }

  private find(h: number, kind: number, hi: number, lo: number, text: string | undefined): number {
    const table = this.table;
    const mask = this.mask;
    for (let i = h & mask; ; i = (i + 1) & mask) {
      const slot = table[i]!;
      if (slot === NONE) return NONE;
      if (
        this.los[slot] === lo &&
        this.his[slot] === hi &&
        this.kinds[slot] === kind &&
        (kind !== HASH_TEXT || this.texts![slot] === text)
      ) {
        return slot;
      }
    }
  }

  private remove(slot: number): void {
    this.unplace(slot);
    const newer = this.newer[slot]!;
    const older = this.older[slot]!;
    if (newer !== NONE) this.older[newer] = older;
    else this.newest = older;
    if (older !== NONE) this.newer[older] = newer;
    else this.oldestSlot = newer;
    if (this.texts !== undefined) this.texts[slot] = undefined;
    this.newer[slot] = this.freeHead;
    this.freeHead = slot;
    this.count--;
  }

  private place(slot: number): void {
    const mask = this.mask;
    let i = this.home(this.kinds[slot]!, this.his[slot]!, this.los[slot]!);
    while (this.table[i] !== NONE) i = (i + 1) & mask;
    this.table[i] = slot;
  }

  /** Takes a slot out of the table, shifting back the entries that probed past it. */
  private unplace(slot: number): void {
    const table = this.table;
    const mask = this.mask;
    let i = this.home(this.kinds[slot]!, this.his[slot]!, this.los[slot]!);
    while (table[i] !== slot) i = (i + 1) & mask;
    table[i] = NONE;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const moved = table[j]!;
      if (moved === NONE) return;
      const home = this.home(this.kinds[moved]!, this.his[moved]!, this.los[moved]!);
      // The entry at j may move to the hole at i unless its home lies cyclically in (i, j].
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (!stays) {
        table[i] = moved;
        table[j] = NONE;
        i = j;
      }
    }
  }

  private rehash(size: number): void {
    this.table = new Int32Array(size);
    this.mask = size - 1;
    for (let s = this.oldestSlot; s !== NONE; s = this.newer[s]!) this.place(s);
  }

  private resize(slots: number): void {
    const n = Math.min(this.kinds.length, slots);
    const grow = <T extends Uint8Array | Uint32Array | Int32Array | Float64Array>(
      a: T,
      make: (length: number) => T,
    ): T => {
      const b = make(slots);
      b.set(a.subarray(0, n) as never);
      return b;
    };
    this.kinds = grow(this.kinds, (l) => new Uint8Array(l));
    this.his = grow(this.his, (l) => new Uint32Array(l));
    this.los = grow(this.los, (l) => new Uint32Array(l));
    this.values = grow(this.values, (l) => new Float64Array(l));
    this.seqs = grow(this.seqs, (l) => new Float64Array(l));
    this.newer = grow(this.newer, (l) => new Int32Array(l));
    this.older = grow(this.older, (l) => new Int32Array(l));
  }
}

type Entry = [
  kind: number,
  hi: number,
  lo: number,
  text: string | undefined,
  value: number,
  seq: number,
];

/** A seeded mix of a key's words: one multiply and one finalizer (every lookup pays it). */
function mix(seed: number, kind: number, hi: number, lo: number): number {
  return fmix32(Math.imul(hi ^ seed, 0x9e3779b1) ^ lo ^ (kind << 29));
}

/** Shards of a map: a growth rehashes and copies one shard, a sixteenth of the entries. */
const SHARD_BITS = 4;

export class Hash64Map {
  private readonly shards: Shard[];
  private seq = 0;
  private count = 0;

  constructor(private readonly seed = (Math.random() * 2 ** 32) >>> 0) {
    // Each shard's own seed: the bits that chose the shard must not also choose the place in it.
    this.shards = Array.from({ length: 1 << SHARD_BITS }, () => new Shard(seed));
  }

  get size(): number {
    return this.count;
  }

  /** The top bits of a key's mix choose its shard; its low bits, its place in the shard's table. */
  private shard(h: number): Shard {
    return this.shards[h >>> (32 - SHARD_BITS)]!;
  }

  get(kind: number, hi: number, lo: number, text?: string): number | undefined {
    const h = mix(this.seed, kind, hi, lo);
    return this.shard(h).get(h, kind, hi, lo, text);
  }

  has(kind: number, hi: number, lo: number, text?: string): boolean {
    const h = mix(this.seed, kind, hi, lo);
    return this.shard(h).has(h, kind, hi, lo, text);
  }

  /** Sets the key's value; a new key becomes the newest, an existing one keeps its place. */
  set(kind: number, hi: number, lo: number, text: string | undefined, value: number): void {
    const h = mix(this.seed, kind, hi, lo);
    if (this.shard(h).set(h, kind, hi, lo, text, value, this.seq)) {
      this.seq++;
      this.count++;
    }
  }

  /** Removes the key; its value, or undefined when it was not there. */
  delete(kind: number, hi: number, lo: number, text?: string): number | undefined {
    const h = mix(this.seed, kind, hi, lo);
    const value = this.shard(h).delete(h, kind, hi, lo, text);
    if (value !== undefined) this.count--;
    return value;
  }

  /** Removes the oldest entry; its value, or undefined when the map is empty. */
  shift(): number | undefined {
    let oldest: Shard | undefined;
    for (const shard of this.shards) {
      if (shard.size > 0 && (oldest === undefined || shard.oldestSeq < oldest.oldestSeq)) {
        oldest = shard;
      }
    }
    if (oldest === undefined) return undefined;
    this.count--;
    return oldest.shift();
  }

  /** Forgets every entry; the arrays keep their size (see Shard.clear). */
  clear(): void {
    for (const shard of this.shards) shard.clear();
    this.count = 0;
  }

  /** Calls fn for every entry, oldest first (tests). */
  forEach(
    fn: (kind: number, hi: number, lo: number, text: string | undefined, value: number) => void,
  ) {
    const entries: Entry[] = [];
    for (const shard of this.shards) {
      shard.forEach((e) => {
        entries.push(e);
      });
    }
    entries.sort((a, b) => a[5] - b[5]);
    for (const [kind, hi, lo, text, value] of entries) fn(kind, hi, lo, text, value);
  }

  /** Places in the slots and in the tables, all shards together (tests: memory stays bounded). */
  get allocated(): { slots: number; table: number } {
    let slots = 0;
    let table = 0;
    for (const shard of this.shards) {
      slots += shard.allocated.slots;
      table += shard.allocated.table;
    }
    return { slots, table };
  }
}
