import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_CHARS } from "../../src/tree/char-budget.js";
import { keyAt } from "../../src/tree/edge-match.js";
import { RadixTree } from "../../src/tree/radix-tree.js";
import { isHigh, isLow } from "./reference-model.js";

/** The edge labels, root first, read through the private root (only to check the tree's shape). */
function labels(tree: RadixTree): string[] {
  interface Shape {
    label: string;
    kids: Shape[] | null;
    map: Map<number, Shape> | null;
  }
  const out: string[] = [];
  const stack: Shape[] = [(tree as unknown as { root: Shape }).root];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    if (node.label !== "") out.push(node.label);
    for (const kid of node.kids ?? node.map?.values() ?? []) stack.push(kid);
  }
  return out;
}

function expectCountersExact(tree: RadixTree): void {
  expect(tree.recount()).toEqual({ chars: tree.charCount, nodes: tree.nodeCount });
}

describe("RadixTree basics", () => {
  it("matches nothing when empty, and an empty text matches 0", () => {
    const tree = new RadixTree();
    expect(tree.match("hello")).toBe(0);
    tree.insert("hello");
    expect(tree.match("")).toBe(0);
  });

  it("treats inserting an empty string as a no-op", () => {
    const tree = new RadixTree();
    tree.insert("");
    expect(tree.charCount).toBe(0);
    expect(tree.nodeCount).toBe(0);
    expect(tree.match("")).toBe(0);
  });

  it("matches the longest common prefix with anything inserted", () => {
    const tree = new RadixTree();
    tree.insert("You are a helpful assistant. Hi");
    tree.insert("You are a pirate. Arr");
    expect(tree.match("You are a helpful assistant. Hello")).toBe(30);
    expect(tree.match("You are a pirate. Arr, matey")).toBe(21);
    expect(tree.match("You are a poet")).toBe(11);
    expect(tree.match("Yo")).toBe(2);
    expect(tree.match("Hello")).toBe(0);
    expect(tree.charCount).toBe(31 + 11);
    expect(tree.nodeCount).toBe(3);
    expectCountersExact(tree);
  });

  it("splits an edge when a prefix of a held string is inserted, adding no characters", () => {
    const tree = new RadixTree();
    tree.insert("abcdef");
    tree.insert("abc");
    expect(tree.charCount).toBe(6);
    expect(tree.nodeCount).toBe(2);
    expect(labels(tree).sort()).toEqual(["abc", "def"]);
    expect(tree.match("abcdeX")).toBe(5);
    expectCountersExact(tree);
  });

  it("finds the exact divergence point inside long labels, at every gallop and bisect boundary", () => {
    const base = Array.from({ length: 5000 }, (_, i) =>
      String.fromCharCode(97 + ((i * 7) % 26)),
    ).join("");
    const tree = new RadixTree();
    tree.insert(base);
    const points = new Set<number>([0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 49, 111, 112, 113, 4095]);
    for (let p = 0; p < base.length; p += 97) points.add(p);
    for (let p = base.length - 20; p < base.length; p++) points.add(p);
    for (const p of points) {
      const changed = `${base.slice(0, p)}#${base.slice(p + 1)}`;
      expect(tree.match(changed)).toBe(p);
      expect(tree.match(base.slice(0, p))).toBe(p);
    }
    expect(tree.match(`${base}more`)).toBe(base.length);
  });

  it("holds many children per node (array, then map) and removes them again", () => {
    const tree = new RadixTree({ maxChars: 1_000_000 });
    const texts = Array.from(
      { length: 60 },
      (_, i) => `shared prefix ${String.fromCharCode(0x4e00 + i)} ${i}`,
    );
    for (const t of texts) tree.insert(t);
    for (const t of texts) expect(tree.match(t)).toBe(t.length);
    expectCountersExact(tree);
    tree.evict(tree.charCount - 1);
    expect(tree.match(texts[0]!)).toBe(14);
    for (const t of texts.slice(1)) expect(tree.match(t)).toBe(t.length);
    tree.evict(14);
    expect(tree.charCount).toBe(14);
    expect(tree.nodeCount).toBe(1);
    expect(tree.match(texts[59]!)).toBe(14);
    expectCountersExact(tree);
  });

  it("clear drops everything and the tree keeps working", () => {
    const tree = new RadixTree();
    tree.insert("alpha");
    tree.insert("beta");
    tree.clear();
    expect(tree.charCount).toBe(0);
    expect(tree.nodeCount).toBe(0);
    expect(tree.match("alpha")).toBe(0);
    tree.insert("alphabet");
    expect(tree.match("alpha")).toBe(5);
    expectCountersExact(tree);
  });

  it("keeps the counters equal to a full recount after every operation", () => {
    const tree = new RadixTree({ maxChars: 40, highWaterRatio: 1.2 });
    const texts = [
      "system: be brief. q1",
      "system: be brief. q2",
      "system: be terse",
      "其他 😀",
      "x",
    ];
    for (let i = 0; i < 50; i++) {
      tree.insert(texts[i % texts.length]! + String(i % 7));
      expectCountersExact(tree);
      tree.match(texts[(i * 3) % texts.length]!);
      expectCountersExact(tree);
      if (i % 11 === 0) {
        tree.evict(20);
        expectCountersExact(tree);
      }
    }
  });
});

describe("RadixTree non-ASCII text", () => {
  it("round-trips CJK, emoji and combining marks exactly", () => {
    const tree = new RadixTree();
    const texts = [
      "你好，世界",
      "你好吗",
      "👩‍💻 code 🎉",
      "👩‍🔬 lab",
      "café",
      "cafe\u0301",
      "😀😀😁",
    ];
    for (const t of texts) tree.insert(t);
    for (const t of texts) expect(tree.match(t)).toBe(t.length);
    expect(tree.match("你好，朋友")).toBe(3);
    expect(tree.match("👩‍🎨")).toBe(3); // woman + zero-width joiner, then a different emoji
    expect(tree.match("cafe")).toBe(4);
    expect(tree.match("cafe\u0300")).toBe(4);
    expect(labels(tree).join("")).toHaveLength(tree.charCount);
  });

  it("never splits a surrogate pair when emoji share their high surrogate", () => {
    const tree = new RadixTree();
    tree.insert("a😀 smile"); // 😀 = D83D DE00
    tree.insert("a😁 grin"); // 😁 = D83D DE01: diverges at the low surrogate
    expect(tree.match("a😀 smile")).toBe(9);
    expect(tree.match("a😁 grin")).toBe(8);
    expect(tree.match("a😂")).toBe(1); // not 2: half a pair is never counted
    expect(tree.match("😀")).toBe(0);
    for (const label of labels(tree)) {
      expect(isLow(label.charCodeAt(0))).toBe(false);
      expect(isHigh(label.charCodeAt(label.length - 1))).toBe(false);
    }
    expect(labels(tree).sort()).toEqual(["a", "😀 smile", "😁 grin"]);
    expectCountersExact(tree);
  });

  it("never ends a match or a split between a pair's halves when the text stops at a high surrogate", () => {
    const tree = new RadixTree();
    tree.insert("x😀y");
    expect(tree.match("x\uD83D")).toBe(1); // a lone high surrogate is a different code point
    tree.insert("x\uD83D");
    expect(tree.match("x\uD83D")).toBe(2);
    expect(tree.match("x😀y")).toBe(4);
    expect(labels(tree).sort()).toEqual(["x", "\uD83D", "😀y"]);
    expectCountersExact(tree);
  });
});

describe("RadixTree LRU eviction", () => {
  it("evicts the least recently inserted leaf first", () => {
    const tree = new RadixTree();
    tree.insert("old conversation");
    tree.insert("middle conversation");
    tree.insert("new conversation");
    const evicted = tree.evict(tree.charCount - 1);
    expect(evicted).toBe("old conversation".length);
    expect(tree.match("old conversation")).toBe(0);
    expect(tree.match("middle conversation")).toBe(19);
    expect(tree.match("new conversation")).toBe(16);
  });

  it("re-inserting a string refreshes every node on its path", () => {
    const tree = new RadixTree();
    tree.insert("shared prefix: first");
    tree.insert("shared prefix: second");
    tree.insert("shared prefix: first"); // now "second" is the least recently used
    tree.evict(tree.charCount - 1);
    expect(tree.match("shared prefix: second")).toBe(15);
    expect(tree.match("shared prefix: first")).toBe(20);
  });

  it("match does not refresh recency", () => {
    const tree = new RadixTree();
    tree.insert("first");
    tree.insert("second");
    for (let i = 0; i < 5; i++) expect(tree.match("first")).toBe(5);
    tree.evict(tree.charCount - 1);
    expect(tree.match("first")).toBe(0);
    expect(tree.match("second")).toBe(6);
  });

  it("a parent left without children becomes a leaf, evicted by its own recency", () => {
    const tree = new RadixTree();
    tree.insert("system A / user 1"); // path: "system " + "A / user 1"
    tree.insert("system B / user 2");
    tree.insert("other");
    tree.insert("system C / user 3");
    // "other" is older than "system " (refreshed by the C insert): the A and B leaves go, then
    // "other", then "C / user 3" and only then "system ".
    expect(tree.evict(7 + 10)).toBe(10 + 10 + 5);
    expect(tree.match("system C / user 3")).toBe(17);
    expect(tree.match("other")).toBe(0);
    expect(tree.evict(7)).toBe(10);
    expect(tree.match("system Z")).toBe(7);
    expect(tree.evict(0)).toBe(7);
    expect(tree.nodeCount).toBe(0);
    expectCountersExact(tree);
  });

  it("brings charCount within the target, returns what it evicted and reports it once", () => {
    const reports: number[] = [];
    const tree = new RadixTree({ maxChars: 1000, onEvict: (n) => reports.push(n) });
    for (let i = 0; i < 20; i++) tree.insert(`prompt number ${i} with some words`);
    const before = tree.charCount;
    const evicted = tree.evict(100);
    expect(tree.charCount).toBeLessThanOrEqual(100);
    expect(evicted).toBe(before - tree.charCount);
    expect(reports).toEqual([evicted]);
    expectCountersExact(tree);
  });

  it("does nothing and reports nothing when already within the target", () => {
    const reports: number[] = [];
    const tree = new RadixTree({ maxChars: 100, onEvict: (n) => reports.push(n) });
    tree.insert("small");
    expect(tree.evict()).toBe(0);
    expect(tree.evict(5)).toBe(0);
    expect(tree.match("small")).toBe(5);
    expect(reports).toEqual([]);
  });

  it("evict() without a target evicts down to maxChars", () => {
    const tree = new RadixTree({ maxChars: 30, highWaterRatio: 10 });
    for (let i = 0; i < 10; i++) tree.insert(`entry ${i} padding`);
    expect(tree.charCount).toBeGreaterThan(30);
    tree.evict();
    expect(tree.charCount).toBeLessThanOrEqual(30);
    expect(tree.match("entry 9 padding")).toBe(15);
  });

  it("rejects a negative or NaN evict target", () => {
    const tree = new RadixTree();
    expect(() => tree.evict(-1)).toThrow(RangeError);
    expect(() => tree.evict(Number.NaN)).toThrow(RangeError);
  });
});

describe("RadixTree tail-first eviction (evictTailFirst)", () => {
  // A tool preamble, then two tenants' prompts: the older tenant's prompt is the oldest leaf.
  const preamble = "tools: ".repeat(10);
  const tenantA = `${preamble}A system prompt ${"a".repeat(60)}`;
  const tenantB = `${preamble}B system prompt ${"b".repeat(60)}`;

  it("takes only the excess off the oldest leaf's end, which stays the oldest", () => {
    const tree = new RadixTree({ maxChars: 10_000, evictTailFirst: true });
    tree.insert(tenantA);
    tree.insert(tenantB);
    const evicted = tree.evict(tree.charCount - 20);
    expect(evicted).toBe(20);
    // A block-LRU engine still holds tenant A's prompt but its last 20 characters.
    expect(tree.match(tenantA)).toBe(tenantA.length - 20);
    expect(tree.match(tenantB)).toBe(tenantB.length);
    // The next eviction goes on at A's end, before B is touched.
    tree.evict(tree.charCount - 30);
    expect(tree.match(tenantA)).toBe(tenantA.length - 50);
    expect(tree.match(tenantB)).toBe(tenantB.length);
  });

  it("without it, the whole oldest leaf goes: the tenant's prompt is forgotten", () => {
    const tree = new RadixTree({ maxChars: 10_000 });
    tree.insert(tenantA);
    tree.insert(tenantB);
    tree.evict(tree.charCount - 20);
    expect(tree.match(tenantA)).toBe(preamble.length);
  });

  it("keeps a surrogate pair whole, cutting one character more", () => {
    const tree = new RadixTree({ maxChars: 10_000, evictTailFirst: true });
    tree.insert("x😀y");
    tree.insert("z");
    // One over: "y" goes. Two over: cutting 2 would split the pair, so all three code units go.
    expect(tree.evict(tree.charCount - 1)).toBe(1);
    expect(tree.evict(tree.charCount - 1)).toBe(2);
    expect(tree.match("x😀y")).toBe(1);
  });
});

describe("RadixTree reactive eviction", () => {
  it("evicts down to maxChars at once when an insert passes the high-water mark", () => {
    const reports: number[] = [];
    const tree = new RadixTree({
      maxChars: 100,
      highWaterRatio: 1.1,
      onEvict: (n) => reports.push(n),
    });
    // 10 chars each, no shared prefixes: A.........  B......... and so on
    for (let i = 0; i < 11; i++) tree.insert(String.fromCharCode(65 + i) + "x".repeat(9));
    expect(tree.charCount).toBe(110); // exactly at the mark: not above it
    expect(reports).toEqual([]);
    tree.insert(`Z${"y".repeat(9)}`);
    expect(reports).toHaveLength(1);
    expect(tree.charCount).toBeLessThanOrEqual(100);
    expect(reports).toEqual([20]);
    expect(tree.charCount).toBe(100);
    expect(tree.match(`A${"x".repeat(9)}`)).toBe(0); // the two oldest went first
    expect(tree.match(`B${"x".repeat(9)}`)).toBe(0);
    expect(tree.match(`C${"x".repeat(9)}`)).toBe(10);
    expect(tree.match(`Z${"y".repeat(9)}`)).toBe(10); // the newest stays
    expectCountersExact(tree);
  });

  it("with highWaterRatio 1 evicts as soon as maxChars is exceeded", () => {
    const tree = new RadixTree({ maxChars: 10, highWaterRatio: 1 });
    tree.insert("0123456789");
    expect(tree.charCount).toBe(10);
    tree.insert("a");
    expect(tree.charCount).toBe(1);
    expect(tree.match("a")).toBe(1);
  });

  it("an insert larger than the whole budget leaves the tree within budget", () => {
    const tree = new RadixTree({ maxChars: 10 });
    tree.insert("kept");
    tree.insert("y".repeat(50));
    expect(tree.charCount).toBeLessThanOrEqual(10);
    expectCountersExact(tree);
  });
});

describe("RadixTree options", () => {
  it("defaults to 2^26 characters", () => {
    expect(new RadixTree().maxChars).toBe(DEFAULT_MAX_CHARS);
    expect(DEFAULT_MAX_CHARS).toBe(2 ** 26);
  });

  it.each([
    [{ maxChars: 0 }, /maxChars/],
    [{ maxChars: -5 }, /maxChars/],
    [{ maxChars: 1.5 }, /maxChars/],
    [{ maxChars: Number.NaN }, /maxChars/],
    [{ maxChars: Number.POSITIVE_INFINITY }, /maxChars/],
    [{ maxChars: "100" }, /maxChars/],
    [{ highWaterRatio: 0.9 }, /highWaterRatio/],
    [{ highWaterRatio: Number.NaN }, /highWaterRatio/],
    [{ highWaterRatio: Number.POSITIVE_INFINITY }, /highWaterRatio/],
    [{ onEvict: 42 }, /onEvict/],
    [null, /options/],
  ])("throws a RangeError naming the bad option for %o", (options, message) => {
    expect(() => new RadixTree(options as never)).toThrow(RangeError);
    expect(() => new RadixTree(options as never)).toThrow(message);
  });
});

describe("RadixTree.setMaxChars", () => {
  it("lowers the budget and evicts the least recently used down to it at once", () => {
    const tree = new RadixTree({ maxChars: 1000 });
    tree.insert("a".repeat(100));
    tree.insert("b".repeat(100));
    expect(tree.setMaxChars(150)).toBe(100);
    expect(tree.maxChars).toBe(150);
    expect(tree.match("a".repeat(100))).toBe(0);
    expect(tree.match("b".repeat(100))).toBe(100);
    expect(() => tree.setMaxChars(0)).toThrow(RangeError);
  });
});

describe("a text cut just after a high surrogate", () => {
  // A slice of a longer string whose next unit (outside the slice) is the matching low surrogate:
  // V8's optimized codePointAt (Node 24) read that unit and keyed the lone surrogate as the pair.
  const head = "lorem ipsum dolor sit amet, ".repeat(3);
  const parent = `${head}\uD83D\uD83D\uDE00 tail`;
  const cut = parent.slice(0, head.length + 2); // head + two lone high surrogates

  it("matches its lone surrogate's child however often (and however optimized) match runs", () => {
    const tree = new RadixTree();
    tree.insert(`${head}\uD83D\uD83D`);
    tree.insert(`${head}\uD83D`);
    let wrong = 0;
    for (let i = 0; i < 50_000; i++) if (tree.match(cut) !== cut.length) wrong++;
    expect(wrong).toBe(0);
  });

  it("keyAt reads a pair only within the text", () => {
    for (let i = 0; i < 50_000; i++) {
      if (keyAt(cut, cut.length - 1) !== 0xd83d)
        throw new Error(`keyAt read past the end (run ${i})`);
    }
    expect(keyAt(parent, head.length + 1)).toBe(0x1f600);
    expect(keyAt("a\uDE00", 1)).toBe(0xde00);
    expect(keyAt("\uD83D", 0)).toBe(0xd83d);
  });
});
