/**
 * Event-loop time the KV-event intake may take in one turn, shared by every worker's stream: past
 * it, the intake waits for a later turn (setImmediate), so sockets and timers (/health, requests)
 * are served in between however many engines publish and however fast (issue 20: one batch of
 * 400k blocks stalled /health for 6.6 s).
 *
 * Awaiting only promises never gives the loop back: a ZMQ socket with messages waiting answers
 * `receive()` at once, so a receive loop under a flood would run on microtasks alone.
 */
export class TurnBudget {
  /** When this turn's intake work started; undefined until the first call in a turn. */
  private startedAt: number | undefined;

  constructor(
    private readonly budgetMs: number,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** Whether this turn's budget is spent; the first call of a turn starts its clock. */
  spent(): boolean {
    const now = this.now();
    if (this.startedAt === undefined) {
      this.startedAt = now;
      // Runs before the work that waits for the next turn (immediates run in order).
      setImmediate(() => {
        this.startedAt = undefined;
      });
      return false;
    }
    return now - this.startedAt >= this.budgetMs;
  }

  /** Resolves in this turn while it has budget left, else in a later one. */
  async take(): Promise<void> {
    while (this.spent()) await nextTurn();
  }
}

function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
