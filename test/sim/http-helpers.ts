/** Small helpers for talking to simulated workers over real sockets in tests. */

export function post(
  base: string,
  path: string,
  body: unknown,
  init: RequestInit = {},
): Promise<Response> {
  return fetch(base + path, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
    ...init,
  });
}

/** The `data:` payloads of the complete events of an SSE body: parsed JSON, or "[DONE]". */
export function sseData(text: string): unknown[] {
  const events = text.split("\n\n");
  events.pop(); // after the last "\n\n": empty, or an event still arriving
  return events
    .filter((event) => event.startsWith("data: "))
    .map((event) => {
      const data = event.slice("data: ".length);
      return data === "[DONE]" ? data : (JSON.parse(data) as unknown);
    });
}

/** Resolve once `predicate` holds, polling; reject after `timeoutMs` (a safety net, not a timing assertion). */
export async function waitFor(predicate: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error("waitFor: condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

/** Read a streamed body until `count` SSE events arrived; returns the reader to continue or cancel. */
export async function readEvents(
  res: Response,
  count: number,
): Promise<{ events: unknown[]; reader: ReadableStreamDefaultReader<Uint8Array> }> {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  while (sseData(buffer).length < count) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
  }
  return { events: sseData(buffer), reader };
}

/** A JSON payload from a worker; `any` because the tests assert on its shape. */
// biome-ignore lint/suspicious/noExplicitAny: response payloads are checked by the assertions
export type Payload = any;

/** The parsed JSON body. */
export async function json(res: Response | Promise<Response>): Promise<Payload> {
  return (await res).json();
}
