// Slows down password guessing against the proxy's own authentication (RFC 1929, HTTP Basic).
// A wrong password is answered only after a delay, and a client address with several wrong
// answers still waiting is refused without checking. So one address guesses at most
// maxPending / delay passwords per second (4/s by default) however many connections it opens,
// while right passwords and first challenges (a browser's 407 before it sends credentials) cost
// nothing. No lockout: a lockout would let anyone who can reach the port lock its owner out.
// Addresses share the budget per IP, so on loopback every local user shares one.

export interface ThrottleOptions {
  /** How long a wrong password waits for its answer. */
  delayMs: number;
  /** Wrong answers one IP may have waiting; past that its attempts are refused unchecked. */
  maxPendingPerAddress: number;
}

export const THROTTLE_DEFAULTS: ThrottleOptions = { delayMs: 1_000, maxPendingPerAddress: 4 };

export const TOO_MANY_FAILURES = 'too many wrong proxy passwords from this address; try again in a moment';

export class FailedAuthThrottle {
  private readonly pending = new Map<string, number>();

  constructor(private readonly options: ThrottleOptions = THROTTLE_DEFAULTS) {}

  /** false: refuse this attempt without checking it (see the header). */
  admits(address: string): boolean {
    return (this.pending.get(address) ?? 0) < this.options.maxPendingPerAddress;
  }

  /** Calls `answer` after the delay; `answer` must cope with a client that has gone meanwhile. */
  delayFailure(address: string, answer: () => void): void {
    this.pending.set(address, (this.pending.get(address) ?? 0) + 1);
    const timer = setTimeout(() => {
      const left = (this.pending.get(address) ?? 1) - 1;
      if (left > 0) this.pending.set(address, left);
      else this.pending.delete(address);
      answer();
    }, this.options.delayMs);
    timer.unref();
  }
}
