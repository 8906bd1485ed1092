/**
 * A simulated worker's side of prefill/decode disaggregation (sim/disaggregation.ts has the
 * protocols): the prefill worker's room board (and SGLang's bootstrap server), and the step
 * before a job is served: the prefill side checks the request and reports its rooms when done;
 * the decode side waits for the hand-off, pays the transfer, and finds the prompt's KV cached.
 */
import type { Server, ServerResponse } from "node:http";
import {
  answerRoom,
  awaitHandoff,
  boundPort,
  RoomBoard,
  receiveKv,
  type SimRole,
  sglangRooms,
  sglangSources,
  startBootstrapServer,
  vllmAnswerParams,
  vllmPrefillAsked,
  vllmTransfer,
} from "./disaggregation.js";
import type { PrefixKvCache } from "./kv-cache.js";
import type { ResolvedSimOptions } from "./options.js";
import { BadRequest, type InferenceJob } from "./protocol.js";
import { errorBody } from "./responses.js";
import { type ServeContext, SSE_HEADERS, sendJson } from "./serve.js";

/** What serving a job gets from its side: the hooks serveJob calls. */
export type SideHooks = Pick<ServeContext, "onSettled" | "extraFields">;

export class PdSide {
  private readonly board = new RoomBoard();
  private bootstrap: Server | undefined;
  private transfers = 0;

  constructor(
    readonly role: SimRole,
    private readonly options: ResolvedSimOptions,
    /** Real ms per model ms now (time scale × slowdown). */
    private readonly delayFactor: () => number,
  ) {}

  /** SGLang's prefill worker opens its bootstrap server. */
  async listen(): Promise<void> {
    if (this.role !== "prefill" || this.options.flavor !== "sglang") return;
    this.bootstrap = await startBootstrapServer(
      this.board,
      this.options.host,
      this.options.bootstrapPort,
    );
  }

  /** The bootstrap server's port (an SGLang prefill worker's), else undefined. */
  get bootstrapPort(): number | undefined {
    return this.bootstrap === undefined ? undefined : boundPort(this.bootstrap);
  }

  close(): void {
    this.bootstrap?.close();
    this.bootstrap?.closeAllConnections();
  }

  /** vLLM's transfer ids on the worker's own port: GET /_sim/kv/<id>. */
  answer(path: string, res: ServerResponse): Promise<boolean> {
    return answerRoom(this.board, path, res);
  }

  /**
   * A prefill or decode worker's step before serving: the serving hooks, or undefined once it
   * answered: 400 without the hand-off fields, 500 when the hand-off failed.
   */
  async hooksFor(
    job: InferenceJob,
    body: unknown,
    kv: PrefixKvCache,
    worker: { id: string; port: number },
    res: ServerResponse,
    counters: { rejected: number; aborted: number; failed: number },
  ): Promise<SideHooks | undefined> {
    const gone = new AbortController();
    const onClose = () => gone.abort();
    res.on("close", onClose);
    // An SGLang decode worker takes the request before the KV cache comes: a stream's headers
    // go out at once (FastAPI's StreamingResponse starts before its first event), and a failed
    // hand-off then ends the stream with an error event, as the engine's OpenAI server does
    // (python/sglang/srt/entrypoints/openai/serving_chat.py: create_streaming_error_response).
    const accepted = () => {
      if (!job.stream || res.headersSent) return;
      res.writeHead(200, SSE_HEADERS);
      res.flushHeaders();
    };
    try {
      return await this.prepare(
        job,
        body as Record<string, unknown>,
        kv,
        worker,
        gone.signal,
        accepted,
      );
    } catch (err) {
      if (err instanceof BadRequest) {
        counters.rejected++;
        sendJson(res, 400, errorBody(400, err.message, err.param));
      } else if (gone.signal.aborted) {
        counters.aborted++;
      } else {
        counters.failed++;
        const message = `KV hand-off failed: ${(err as Error).message}`;
        if (res.headersSent) {
          res.end(`data: ${JSON.stringify(errorBody(500, message))}\n\ndata: [DONE]\n\n`);
        } else sendJson(res, 500, errorBody(500, message));
      }
      return undefined;
    } finally {
      res.off("close", onClose);
    }
  }

  /**
   * Before serving: throws BadRequest when the request lacks the hand-off fields, Error when the
   * hand-off failed (the worker answers 500); resolves with the serving hooks.
   */
  async prepare(
    job: InferenceJob,
    body: Record<string, unknown>,
    kv: PrefixKvCache,
    worker: { id: string; port: number },
    signal: AbortSignal,
    /** The request is checked and taken: an SGLang decode worker's stream may begin. */
    accepted: () => void = () => {},
  ): Promise<SideHooks> {
    const sglang = this.options.flavor === "sglang";
    if (this.role === "prefill") {
      if (sglang) {
        const rooms = sglangRooms(body, "prefill");
        // SGLang's prefill server computes the prompt and its first token only.
        job.maxTokens = 1;
        return { onSettled: (ok) => this.settle(rooms, ok) };
      }
      vllmPrefillAsked(body);
      const id = `xfer-${worker.id}-${++this.transfers}`;
      // vLLM answers a batch with its first prompt's transfer params only
      // (vllm/entrypoints/openai/completion/serving.py: final_res_batch[0].kv_transfer_params).
      const tokens = job.prompts[0]?.length ?? 0;
      return {
        onSettled: (ok) => this.settle([id], ok),
        extraFields: {
          kv_transfer_params: vllmAnswerParams(
            worker.id,
            this.options.host,
            worker.port,
            id,
            tokens,
            this.options.blockSize,
          ),
        },
      };
    }
    const timeout = this.options.handoffTimeoutMs;
    if (sglang) {
      const sources = sglangSources(
        body,
        sglangRooms(body, "decode"),
        this.options.defaultBootstrapPort,
      );
      accepted();
      await Promise.all(
        sources.map((s) =>
          awaitHandoff(
            `http://${hostPart(s.host)}:${s.port}/bootstrap/room/${s.room}`,
            timeout,
            signal,
          ),
        ),
      );
    } else {
      const t = vllmTransfer(body);
      await awaitHandoff(
        `http://${hostPart(t.remoteHost)}:${t.remotePort}/_sim/kv/${encodeURIComponent(t.remoteRequestId)}`,
        timeout,
        signal,
      );
    }
    // The KV moves from the prefill worker, then sits in this worker's cache: every item's with
    // SGLang (a room per item), the first prompt's with vLLM (one set of transfer params).
    const received = sglang ? job.prompts : job.prompts.slice(0, 1);
    const tokens = received.reduce((n, p) => n + p.length, 0);
    const ms = ((tokens * 1000) / this.options.transferTokensPerSec) * this.delayFactor();
    if (ms > 0) await new Promise((resolve) => setTimeout(resolve, ms));
    for (const prompt of received) receiveKv(kv, prompt);
    return {};
  }

  private settle(ids: readonly string[], ok: boolean): void {
    for (const id of ids) this.board.settle(id, ok ? "ready" : "failed");
  }
}

function hostPart(host: string): string {
  return host.includes(":") && !host.startsWith("[") ? `[${host}]` : host;
}
