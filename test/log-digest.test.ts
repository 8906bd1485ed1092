import { afterEach, describe, expect, it, vi } from "vitest";
import { LogDigest } from "../src/log-digest.js";
import { captureLogs } from "./helpers/log-capture.js";

interface Line {
  level: number;
  msg: string;
  url?: string;
  count?: number;
  first?: { url: string }[];
}

describe("LogDigest: a burst of one per-worker line becomes one line and a summary", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const digest = () => {
    const logs = captureLogs<Line>("debug");
    const lines = new LogDigest(logs.logger, {
      level: "warn",
      message: "worker failed",
      summary: (n) => `${n} more workers failed`,
      everyMs: 1000,
      sample: 3,
    });
    return { logs, lines };
  };

  it("the first line as it comes, the rest at debug and counted into one summary per window", () => {
    vi.useFakeTimers();
    const { logs, lines } = digest();
    for (let i = 0; i < 100; i++) lines.note({ url: `http://w${i}` });
    const warned = () => logs.entries.filter((l) => l.level === 40);
    expect(warned().map((l) => l.url)).toEqual(["http://w0"]);
    expect(logs.entries.filter((l) => l.level === 20)).toHaveLength(99);
    vi.advanceTimersByTime(1000);
    expect(warned()[1]).toMatchObject({ msg: "99 more workers failed", count: 99 });
    expect(warned()[1]?.first?.map((f) => f.url)).toEqual(["http://w1", "http://w2", "http://w3"]);
    // Still within a flood: held again, summarized at the next window's end.
    lines.note({ url: "http://late" });
    expect(warned()).toHaveLength(2);
    vi.advanceTimersByTime(1000);
    expect(warned()[2]).toMatchObject({ msg: "1 more workers failed", count: 1 });
    // A quiet window ends the digest: the next line is written as it comes.
    vi.advanceTimersByTime(1000);
    lines.note({ url: "http://alone" });
    expect(warned()[3]).toMatchObject({ msg: "worker failed", url: "http://alone" });
  });

  it("flush writes what is held at once (at shutdown), and nothing when nothing is", () => {
    vi.useFakeTimers();
    const { logs, lines } = digest();
    lines.note({ url: "http://a" });
    lines.note({ url: "http://b" });
    lines.flush();
    const warned = logs.entries.filter((l) => l.level === 40);
    expect(warned.map((l) => l.count)).toEqual([undefined, 1]);
    lines.flush();
    expect(logs.entries.filter((l) => l.level === 40)).toHaveLength(2);
    expect(vi.getTimerCount()).toBe(0);
  });
});
