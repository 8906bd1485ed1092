import { describe, expect, it } from "vitest";
import { ResponseHolders, ResponseIdSniffer } from "../../src/workers/response-holders.js";

describe("ResponseHolders", () => {
  it("remembers the worker of each response id", () => {
    const holders = new ResponseHolders(10, 1000);
    holders.record("resp_a", "w1");
    holders.record("resp_b", "w2");
    expect(holders.holder("resp_a")).toBe("w1");
    expect(holders.holder("resp_b")).toBe("w2");
    expect(holders.holder("resp_c")).toBeUndefined();
  });

  it("is bounded: past the limit the oldest id is forgotten first", () => {
    const holders = new ResponseHolders(3, 1000);
    for (let i = 0; i < 5; i++) holders.record(`resp_${i}`, "w");
    expect(holders.size).toBe(3);
    expect(holders.holder("resp_0")).toBeUndefined();
    expect(holders.holder("resp_1")).toBeUndefined();
    expect(holders.holder("resp_4")).toBe("w");
  });

  it("forgets an id older than the TTL when it is read", () => {
    let now = 0;
    const holders = new ResponseHolders(10, 1000, () => now);
    holders.record("resp_a", "w1");
    now = 1000;
    expect(holders.holder("resp_a")).toBe("w1");
    now = 1001;
    expect(holders.holder("resp_a")).toBeUndefined();
    expect(holders.size).toBe(0);
  });

  it("remembers nothing with a limit of 0", () => {
    const holders = new ResponseHolders(0, 1000);
    holders.record("resp_a", "w1");
    expect(holders.holder("resp_a")).toBeUndefined();
  });
});

describe("ResponseIdSniffer", () => {
  const json = '{"id":"resp_sim-1","object":"response","output":[{"id":"msg_x"}]}';

  it("finds the id of a JSON answer, whatever the chunk boundaries", () => {
    for (let cut = 1; cut < json.length; cut++) {
      const sniffer = new ResponseIdSniffer();
      const found = [
        sniffer.write(Buffer.from(json.slice(0, cut))),
        sniffer.write(Buffer.from(json.slice(cut))),
      ];
      expect(found.filter((x) => x !== undefined)).toEqual(["resp_sim-1"]);
    }
  });

  it("finds the response id of a stream's first event", () => {
    const sniffer = new ResponseIdSniffer();
    const event = `event: response.created\ndata: {"type":"response.created","sequence_number":0,"response":{"id":"resp_abc","object":"response"}}\n\n`;
    expect(sniffer.write(Buffer.from(event))).toBe("resp_abc");
    expect(sniffer.write(Buffer.from(event))).toBeUndefined();
  });

  it("gives up after its first 8 KiB", () => {
    const sniffer = new ResponseIdSniffer();
    expect(sniffer.write(Buffer.alloc(9000, 0x20))).toBeUndefined();
    expect(sniffer.write(Buffer.from('{"id":"resp_late"}'))).toBeUndefined();
  });
});
