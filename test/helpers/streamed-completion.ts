import { expect } from "vitest";

/**
 * A streamed completion (model "m") through the router: resolves at its headers, asserting 200,
 * with the worker that serves it, a promise of its first body byte and one of its end. With a
 * `signal`, the stream is meant to be cut: a failed read then ends it quietly.
 */
export async function streamCompletion(
  routerUrl: string,
  prompt: string,
  maxTokens: number,
  options: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<{ worker: string; firstByte: Promise<void>; done: Promise<void> }> {
  const { headers = {}, signal } = options;
  const res = await fetch(`${routerUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: "m", prompt, max_tokens: maxTokens, stream: true }),
    ...(signal !== undefined ? { signal } : {}),
  });
  expect(res.status).toBe(200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let seen: () => void = () => {};
  const firstByte = new Promise<void>((resolve) => {
    seen = resolve;
  });
  const read = async () => {
    for (;;) {
      const { done: end } = await reader.read();
      seen();
      if (end) return;
    }
  };
  const done =
    signal === undefined
      ? read()
      : read().catch(() => {
          seen();
        });
  return { worker: res.headers.get("x-radixgate-worker") ?? "", firstByte, done };
}
