/**
 * Event-loop time the KV-event feed may take in one turn, shared by every worker's stream: past
 * it, the feed waits as long again before it goes on, so sockets and timers (/health, requests)
 * are served in between however many engines publish and however fast (issue 20: one batch of
 * 400k blocks stalled /health for 6.6 s), and the feed takes at most about half of a core. A
 * process that sleeps between its bursts is also woken promptly by the kernel's scheduler on a
 * busy machine, where one that spins waits for its time slice.
 *
 * Awaiting only promises never gives the loop back: a ZMQ socket with messages waiting answers
 * `receive()` at once, so a receive loop under a flood would run on microtasks alone.
 */
export class TurnBudget {
  /** When this turn's event-feed work started; undefined until the first call in a turn. */
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
      setImmediate(() => {
        this.startedAt = undefined;
      });
      return false;
    }
    return now - this.startedAt >= this.budgetMs;
  }

  /** Resolves in this turn while it has budget left, else after a rest as long as the budget. */
  async take(): Promise<void> {
    while (this.spent()) await rest(this.budgetMs);
  }
}

function rest(ms: number): Promise<void> {
  if (ms <= 0) return new Promise((resolve) => setImmediate(resolve));
  return new Promise((resolve) => setTimeout(resolve, ms));
}
