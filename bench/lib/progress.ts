/**
 * A one-line text progress bar on stderr. On a terminal it redraws in place; otherwise (CI logs,
 * redirected output) it prints a single line when the task finishes, so logs stay readable.
 */
export class ProgressBar {
  private done = 0;
  private lastDraw = 0;
  private readonly started = performance.now();
  private readonly tty: boolean;

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly width = 30,
  ) {
    this.tty = stream.isTTY === true;
  }

  tick(n = 1): void {
    this.done += n;
    const now = performance.now();
    // Redraw at most every 100 ms: a redraw per request would cost more than the request.
    if (this.tty && (now - this.lastDraw > 100 || this.done >= this.total)) {
      this.lastDraw = now;
      this.stream.write(`\r${this.line()}`);
    }
  }

  finish(): void {
    this.stream.write(this.tty ? `\r${this.line()}\n` : `${this.line()}\n`);
  }

  private line(): string {
    const fraction = this.total === 0 ? 1 : Math.min(1, this.done / this.total);
    const filled = Math.round(fraction * this.width);
    const bar = `${"#".repeat(filled)}${".".repeat(this.width - filled)}`;
    const secs = ((performance.now() - this.started) / 1000).toFixed(1);
    return `[${bar}] ${String(this.done).padStart(String(this.total).length)}/${this.total} ${secs}s ${this.label}`;
  }
}
