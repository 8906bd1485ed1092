import { describe, expect, it } from "vitest";
import { responseHeaders, upstreamRequestHeaders } from "../../src/proxy/headers.js";

describe("hop-by-hop headers named by Connection", () => {
  it("drops one named header, in any case and with spaces, and the usual keep-alive", () => {
    const out = upstreamRequestHeaders(
      { connection: " X-Debug ", "x-debug": "1", "keep-alive": "timeout=5", accept: "*/*" },
      "r1",
      true,
    );
    expect(out).toEqual({ accept: "*/*", "x-request-id": "r1" });
  });

  it("drops every header a list names, and those of a repeated Connection header", () => {
    const out = upstreamRequestHeaders(
      { connection: "x-a, X-B", "x-a": "1", "x-b": "2", "x-c": "3" },
      "r2",
      true,
    );
    expect(out).toEqual({ "x-c": "3", "x-request-id": "r2" });
    const answer = responseHeaders(
      { connection: ["close", "x-a"] as unknown as string, "x-a": "1", "content-length": "2" },
      "w",
      "route",
      "r3",
    );
    expect(answer).toEqual({
      "content-length": "2",
      "x-radixgate-worker": "w",
      "x-radixgate-route": "route",
      "x-request-id": "r3",
    });
  });

  it("keeps everything a Connection header does not name", () => {
    const answer = responseHeaders(
      { connection: "keep-alive", "content-type": "application/json" },
      "w",
      "r",
      "id",
    );
    expect(answer["content-type"]).toBe("application/json");
    expect(answer.connection).toBeUndefined();
  });
});
