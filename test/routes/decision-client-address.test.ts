import { Socket } from "node:net";
import { describe, expect, it } from "vitest";
import { nameClientAddress } from "../../src/routes/decision.js";

describe("the client's address nginx names on a kept-alive decision connection", () => {
  it("is the socket's remoteAddress for each request in turn, and none when nginx named none", () => {
    const socket = new Socket();
    nameClientAddress(socket, "10.0.0.1");
    expect(socket.remoteAddress).toBe("10.0.0.1");
    nameClientAddress(socket, "192.168.1.2");
    expect(socket.remoteAddress).toBe("192.168.1.2");
    nameClientAddress(socket, undefined);
    expect(socket.remoteAddress).toBeUndefined();
    nameClientAddress(socket, "127.0.0.1");
    expect(socket.remoteAddress).toBe("127.0.0.1");
    // Another connection keeps its own.
    const other = new Socket();
    nameClientAddress(other, "10.9.9.9");
    expect(socket.remoteAddress).toBe("127.0.0.1");
    expect(other.remoteAddress).toBe("10.9.9.9");
    socket.destroy();
    other.destroy();
  });
});
