import { postJson } from "./router.js";

export interface WorkerRow {
  id: string;
  url: string;
  healthy: boolean;
  draining?: boolean;
  tree_characters: number;
}

/** GET /workers. */
export async function listWorkers(routerUrl: string): Promise<WorkerRow[]> {
  const res = await fetch(`${routerUrl}/workers`);
  return ((await res.json()) as { workers: WorkerRow[] }).workers;
}

/** One short completion; which sim served it (x-sim-worker-id), or the status when none did. */
export async function servedBy(routerUrl: string, prompt = "which worker?"): Promise<string> {
  const res = await postJson(`${routerUrl}/v1/completions`, { prompt, max_tokens: 1 });
  await res.arrayBuffer();
  return res.headers.get("x-sim-worker-id") ?? `status ${res.status}`;
}

/** A long streamed completion, read to its end: resolves to its status and whether it finished. */
export async function longStream(
  routerUrl: string,
  maxTokens: number,
): Promise<{ status: number; worker: string | null; done: boolean }> {
  const res = await postJson(`${routerUrl}/v1/completions`, {
    prompt: "a long one",
    max_tokens: maxTokens,
    stream: true,
  });
  const text = await res.text();
  return {
    status: res.status,
    worker: res.headers.get("x-sim-worker-id"),
    done: text.includes("data: [DONE]") && !text.includes('"error"'),
  };
}
