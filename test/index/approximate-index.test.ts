import { ApproximateIndex } from "../../src/index/approximate-index.js";
import type { PrefixIndex } from "../../src/index/prefix-index.js";
import { describePrefixIndex } from "./prefix-index.conformance.js";

describePrefixIndex("ApproximateIndex", {
  make: (options) => new ApproximateIndex(options),
  check(index: PrefixIndex) {
    const approx = index as ApproximateIndex;
    for (const tree of approx.evictionUnits()) {
      const t = tree as unknown as { recount(): { chars: number }; charCount: number };
      if (t.recount().chars !== t.charCount) throw new Error("tree counters wrong");
    }
  },
});
