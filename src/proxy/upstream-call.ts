import type { IncomingHttpHeaders } from "node:http";
import type { Dispatcher } from "undici";
import type { Cancel } from "./cancel.js";

/** Where an answer's body goes, chunk by chunk, straight from undici's parser. */
export interface BodySink {
  onData(chunk: Buffer): void;
  onEnd(): void;
  onError(err: Error): void;
}

/** A worker's answer once its headers came: the body is handed to a sink, not a stream. */
export interface UpstreamAnswer {
  readonly statusCode: number;
  readonly headers: IncomingHttpHeaders;
  /** Starts the body towards `sink` (once). Nothing is read before. */
  pipeTo(sink: BodySink): void;
  /** Stops reading the worker's socket after the current chunk (back-pressure). */
  pause(): void;
  resume(): void;
  /** Throws the body away, keeping the connection when it is short; cuts it beyond DUMP_LIMIT. */
  dump(): void;
  /** Stops the answer where it is: the rest is not read and the connection is dropped. */
  cut(): void;
}

/** The most of a discarded answer read to keep its connection (undici's own dump() limit). */
const DUMP_LIMIT = 128 * 1024;

/**
 * One request to a worker through undici's lowest level, `dispatch` with a handler: the body's
 * chunks go from the parser to the relay's sink as plain calls, with back-pressure by pausing the
 * parser, rather than through a Readable (push, buffer, "data" event) per chunk. Resolves at the
 * response headers; rejects when the request fails before them (with undici's error, or the
 * cancel's reason when it was aborted).
 */
export function callUpstream(
  dispatcher: Dispatcher,
  options: Dispatcher.DispatchOptions,
  cancel: Cancel,
  /** Called at an interim (1xx) answer: the peer has the request and works on it. */
  onInterim?: () => void,
): Promise<UpstreamAnswer> {
  return new Promise((resolve, reject) => {
    const call = new UpstreamCall(cancel, resolve, reject, onInterim);
    if (cancel.aborted) {
      reject(cancel.reason);
      return;
    }
    dispatcher.dispatch(options, call);
  });
}

class UpstreamCall implements Dispatcher.DispatchHandler, UpstreamAnswer {
  statusCode = 0;
  headers: IncomingHttpHeaders = {};
  private controller: Dispatcher.DispatchController | undefined;
  private sink: BodySink | undefined;
  /** Set until the headers came: a failure then rejects the call instead of reaching a sink. */
  private pending = true;
  /** How the body ended before a sink was there, delivered when one comes. */
  private ended: { error?: Error } | undefined;
  private readonly onCancel = () => this.controller?.abort(abortError(this.cancel.reason));

  constructor(
    private readonly cancel: Cancel,
    private readonly resolve: (answer: UpstreamAnswer) => void,
    private readonly reject: (err: unknown) => void,
    private readonly onInterim: (() => void) | undefined,
  ) {}

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancel.aborted) controller.abort(abortError(this.cancel.reason));
    else this.cancel.once("abort", this.onCancel);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: IncomingHttpHeaders,
  ): void {
    // 1xx (102 Processing and the like) are not the answer.
    if (statusCode < 200) {
      this.onInterim?.();
      return;
    }
    this.statusCode = statusCode;
    this.headers = headers;
    this.pending = false;
    // undici's controller keeps the raw header Buffers for the life of the request (a dozen
    // objects, about 1.6 KB per open stream); the parsed headers above are all the relay needs.
    controller.rawHeaders = null;
    // Nothing is read until the caller knows what to do with the body.
    controller.pause();
    this.resolve(this);
  }

  onResponseData(_controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.sink?.onData(chunk);
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    controller.rawTrailers = null;
    this.cancel.off("abort", this.onCancel);
    if (this.sink !== undefined) this.sink.onEnd();
    else this.ended = {};
  }

  onResponseError(_controller: Dispatcher.DispatchController, err: Error): void {
    this.cancel.off("abort", this.onCancel);
    if (this.pending) {
      this.pending = false;
      this.reject(err);
    } else if (this.sink !== undefined) this.sink.onError(err);
    else this.ended = { error: err };
  }

  pipeTo(sink: BodySink): void {
    if (this.sink !== undefined) return;
    this.sink = sink;
    const ended = this.ended;
    if (ended === undefined) this.controller?.resume();
    else if (ended.error !== undefined) sink.onError(ended.error);
    else sink.onEnd();
  }

  pause(): void {
    this.controller?.pause();
  }

  resume(): void {
    this.controller?.resume();
  }

  cut(): void {
    this.controller?.abort(new Error("answer cut"));
  }

  dump(): void {
    let read = 0;
    this.pipeTo({
      onData: (chunk) => {
        read += chunk.length;
        if (read > DUMP_LIMIT) this.controller?.abort(new Error("discarded answer too long"));
      },
      onEnd: () => {},
      onError: () => {},
    });
  }
}

/** The cancel's reason as the Error undici's abort() takes (the reasons are Errors already). */
function abortError(reason: unknown): Error {
  return reason instanceof Error ? reason : new Error(String(reason ?? "aborted"));
}
