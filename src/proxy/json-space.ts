/** Whether a byte is JSON whitespace (RFC 8259: space, tab, line feed, carriage return). */
export function isJsonSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
}
