import { type ChildProcess, fork } from "node:child_process";
import { EventEmitter } from "node:events";
import { createRequire } from "node:module";
import { Socket } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The `code` of the Error a module process emits when it ran out of heap. */
export const OUT_OF_MEMORY = "ERR_MODULE_PROCESS_OUT_OF_MEMORY";

/** Limits of one module process. */
export interface ModuleProcessLimits {
  /** Its old-generation heap, MB (V8's --max-old-space-size). */
  readonly memoryMb: number;
  /**
   * A pipe of its own for raw bytes (postBytes, parentChannel's readBytes): a message is a
   * structured clone, so a 60 MB Buffer in one was serialized, copied again and written in one
   * go on the event loop (seconds under load); bytes written to the pipe leave as the child reads
   * them, from the caller's own Buffer.
   */
  readonly byteChannel?: boolean;
}

/** The child's descriptor of the byte channel (after stdin, stdout, stderr and the IPC channel). */
const BYTE_CHANNEL_FD = 4;

/** Bytes of the child's stderr kept, enough for V8's fatal-error line. */
const STDERR_TAIL = 4096;

/**
 * A module run in a child process of its own, with a heap limit, that a caller talks to by
 * messages (structured clones: Maps and Buffers survive). A worker thread's heap limit is not a
 * safe bound for untrusted input: a thread that hits it can still end the whole process with a
 * fatal "Reached heap limit", because V8 may need to allocate again while the thread is torn down
 * (seen on Node 20 and 24; nodejs/node#47224, and #65019 documents the limit as best-effort). A
 * child that runs out of heap takes only itself down.
 *
 * Events: "message" (value), "error" (Error; `code` OUT_OF_MEMORY when the heap ran out), then
 * "exit" (status, or null when a signal ended it). Never keeps the parent alive on its own.
 */
export class ModuleProcess extends EventEmitter {
  private readonly child: ChildProcess;
  private readonly bytes: Socket | undefined;
  private stderr = "";
  private exited = false;

  constructor(entry: URL, limits: ModuleProcessLimits) {
    super();
    const heap = [`--max-old-space-size=${limits.memoryMb}`];
    // Built (dist/), the entry is plain JavaScript; under tsx or vitest (tests, benchmarks) it is
    // TypeScript, run through tsx's loader.
    const typescript = import.meta.url.endsWith(".ts");
    const path = fileURLToPath(typescript ? entry.href.replace(/\.js$/, ".ts") : entry);
    this.child = fork(path, [], {
      execArgv: typescript ? ["--import", tsxLoader(), ...heap] : heap,
      serialization: "advanced",
      stdio:
        limits.byteChannel === true
          ? ["ignore", "ignore", "pipe", "ipc", "pipe"]
          : ["ignore", "ignore", "pipe", "ipc"],
    });
    const bytes = this.child.stdio[BYTE_CHANNEL_FD];
    this.bytes = bytes instanceof Socket ? bytes : undefined;
    // A child that dies while bytes are on their way breaks the pipe: its "exit" reports that.
    this.bytes?.on("error", () => {});
    this.child.stderr?.setEncoding("utf8").on("data", (text: string) => {
      this.stderr = (this.stderr + text).slice(-STDERR_TAIL);
    });
    this.child.on("message", (value) => this.emit("message", value));
    this.child.on("error", (err) => this.fail(err));
    this.child.on("exit", (status, signal) => {
      this.exited = true;
      if (/heap out of memory|Allocation failed/.test(this.stderr)) {
        this.fail(
          Object.assign(new Error("the module process ran out of heap"), { code: OUT_OF_MEMORY }),
        );
      } else if (status !== 0 && signal !== "SIGKILL") {
        const cause = this.stderr.split("\n").find((line) => /Error/.test(line)) ?? "";
        this.fail(
          new Error(`the module process ended (${signal ?? `status ${status}`}) ${cause}`.trim()),
        );
      }
      this.emit("exit", status);
    });
    this.child.unref();
    this.child.channel?.unref();
    (this.child.stderr as { unref?: () => void } | null)?.unref?.();
    this.bytes?.unref();
  }

  /** An "error" nobody listens to is dropped: "exit" follows and says the process is gone. */
  private fail(err: Error): void {
    if (this.listenerCount("error") > 0) this.emit("error", err);
  }

  postMessage(value: unknown): void {
    if (this.exited || !this.child.connected) return;
    this.child.send(value as object, (err) => {
      // The child died between the check and the write: its "exit" reports it.
      if (err !== null && err !== undefined && !this.exited) this.child.kill("SIGKILL");
    });
  }

  /**
   * Writes `bytes` to the byte channel (limits.byteChannel), in order, without copying them: the
   * caller's buffer is held until the child has read it. The child reads them with readBytes.
   */
  postBytes(bytes: Uint8Array): void {
    if (this.exited || this.bytes === undefined || this.bytes.destroyed) return;
    this.bytes.write(bytes);
  }

  /** Stops the process at once (a parse in progress is abandoned). */
  terminate(): Promise<void> {
    if (this.exited) return Promise.resolve();
    return new Promise((resolve) => {
      this.child.once("exit", () => resolve());
      this.child.kill("SIGKILL");
    });
  }
}

/** In the module's process: the messages from its parent, and the way back. */
export function parentChannel(): {
  onMessage(handler: (value: unknown) => void): void;
  post(value: unknown): void;
  /** The next `length` bytes of the byte channel (ModuleProcess.postBytes), in one Buffer. */
  readBytes(length: number): Promise<Buffer>;
} {
  const send = process.send?.bind(process);
  if (send === undefined) throw new Error("this module must run in a ModuleProcess");
  // Orphaned (the parent died): nothing will ever read an answer.
  process.on("disconnect", () => process.exit(0));
  let reader: ByteReader | undefined;
  return {
    onMessage: (handler) => process.on("message", handler),
    post: (value) => send(value as object),
    readBytes: (length) => {
      reader ??= new ByteReader(
        new Socket({ fd: BYTE_CHANNEL_FD, readable: true, writable: false }),
      );
      return reader.read(length);
    },
  };
}

/**
 * Reads a stream in pieces of known length, in order: each read gets a buffer of its length,
 * filled as the bytes come (the bytes may come before the message that says how many to read).
 */
class ByteReader {
  private readonly waiting: { into: Buffer; at: number; resolve: (bytes: Buffer) => void }[] = [];
  private readonly early: Buffer[] = [];

  constructor(stream: Socket) {
    stream.unref();
    stream.on("data", (chunk: Buffer) => this.take(chunk));
    // The parent went away: nothing more will come (the IPC channel's "disconnect" exits).
    stream.on("error", () => {});
  }

  read(length: number): Promise<Buffer> {
    return new Promise((resolve) => {
      this.waiting.push({ into: Buffer.allocUnsafeSlow(length), at: 0, resolve });
      const early = this.early.splice(0);
      if (length === 0) this.settle();
      for (const chunk of early) this.take(chunk);
    });
  }

  private take(chunk: Buffer): void {
    let rest = chunk;
    while (rest.length > 0) {
      const head = this.waiting[0];
      if (head === undefined) {
        this.early.push(rest);
        return;
      }
      const n = rest.copy(head.into, head.at);
      head.at += n;
      rest = rest.subarray(n);
      this.settle();
    }
  }

  private settle(): void {
    while (this.waiting.length > 0 && this.waiting[0]!.at === this.waiting[0]!.into.length) {
      const done = this.waiting.shift()!;
      done.resolve(done.into);
    }
  }
}

function tsxLoader(): string {
  // tsx's package.json maps its main import to dist/loader.mjs (registers its ESM hooks).
  const tsxRoot = dirname(createRequire(import.meta.url).resolve("tsx/package.json"));
  return pathToFileURL(join(tsxRoot, "dist/loader.mjs")).href;
}
