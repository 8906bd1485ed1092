import { ModuleProcess, OUT_OF_MEMORY } from "./module-process.js";

/**
 * A parser a parse process can load: the module's URL (its `import.meta.url`) and the name of the
 * function it exports, `(text, path) => value`, which throws an Error saying what is wrong. The
 * value must survive a structured clone (plain objects, arrays, Maps; no functions).
 */
export interface ParserRef {
  readonly module: string;
  readonly name: string;
}

export interface ParseRequest {
  readonly id: number;
  readonly parser: ParserRef;
  readonly text: string;
  readonly path: string;
}

export type ParseOutcome = { id: number } & ({ value: unknown } | { error: string });

/** Limits of one parse process. */
export interface ParseLimits {
  /** Its old-generation heap, MB: a parser that needs more dies alone. */
  readonly memoryMb: number;
  /** A parse still running after this is stopped. */
  readonly timeoutMs: number;
}

/**
 * Generous for a 1 MB file (parsing one of 10,000 workers peaks near 60 MB of heap and 1 s on
 * a loaded core), small beside the router's. The timeout includes the process's start, which
 * under tsx compiles the parser's modules.
 */
export const FILE_PARSE_LIMITS: ParseLimits = { memoryMb: 128, timeoutMs: 30_000 };

/**
 * Runs parsers in a child process of its own, so that a hostile file can neither stall the event loop
 * that serves requests nor crash the process: a parser that throws, runs out of heap or stack,
 * or overruns the timeout rejects with an Error saying so, and its process is replaced by the
 * next parse. The process stays between parses (a file changes rarely, but its start costs
 * more than parsing a small file); one parse at a time.
 */
export class IsolatedParser {
  private child: ModuleProcess | undefined;
  private nextId = 1;

  constructor(private readonly limits: ParseLimits = FILE_PARSE_LIMITS) {}

  parse<T>(parser: ParserRef, text: string, path: string): Promise<T> {
    const child = this.ensureChild();
    const request: ParseRequest = { id: this.nextId++, parser, text, path };
    const { memoryMb, timeoutMs } = this.limits;
    return new Promise<T>((resolve, reject) => {
      const settle = (ok: boolean, fn: () => void) => {
        clearTimeout(timer);
        child.off("message", onMessage).off("error", onError).off("exit", onExit);
        if (!ok) this.discard(child);
        fn();
      };
      const onMessage = (outcome: ParseOutcome) => {
        if (outcome.id !== request.id) return;
        settle(true, () =>
          "error" in outcome ? reject(new Error(outcome.error)) : resolve(outcome.value as T),
        );
      };
      const onError = (err: Error & { code?: string }) =>
        settle(false, () =>
          reject(
            new Error(
              err.code === OUT_OF_MEMORY
                ? `parsing needs more than ${memoryMb} MB`
                : `the parser failed: ${err.message}`,
            ),
          ),
        );
      const onExit = (code: number) =>
        settle(false, () => reject(new Error(`the parser exited (status ${code})`)));
      const timer = setTimeout(
        () => settle(false, () => reject(new Error(`parsing took longer than ${timeoutMs} ms`))),
        timeoutMs,
      );
      timer.unref();
      child.on("message", onMessage).once("error", onError).once("exit", onExit);
      child.postMessage(request);
    });
  }

  close(): void {
    if (this.child !== undefined) this.discard(this.child);
  }

  private ensureChild(): ModuleProcess {
    this.child ??= new ModuleProcess(new URL("./parse-process.js", import.meta.url), {
      memoryMb: this.limits.memoryMb,
    });
    return this.child;
  }

  private discard(child: ModuleProcess): void {
    if (this.child === child) this.child = undefined;
    void child.terminate();
  }
}
