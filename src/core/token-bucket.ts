// A token bucket (the classic rate limiter: `ratePerSecond` tokens added continuously, at most
// `burst` kept): bounds how often something may happen on average while allowing a short burst.

export interface TokenBucketOptions {
  ratePerSecond: number;
  burst: number;
}

export class TokenBucket {
  private tokens: number;
  private refilledAt: number;

  constructor(
    private readonly options: TokenBucketOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.tokens = options.burst;
    this.refilledAt = now();
  }

  /** Takes one token if there is one; false means "over the rate, refuse". */
  take(): boolean {
    const now = this.now();
    const elapsedS = Math.max(0, now - this.refilledAt) / 1000;
    this.tokens = Math.min(this.options.burst, this.tokens + elapsedS * this.options.ratePerSecond);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
