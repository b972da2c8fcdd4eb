// The retry delays of the watch clients (informer.ts, slim-watch.ts), as client-go's reflector
// paces ListAndWatch (staging/src/k8s.io/client-go/tools/cache/reflector.go: an exponential
// backoff manager, 800 ms → 30 s, reset after 2 minutes without a retry; ours starts at 500 ms). Every restart counts —
// a failure, a 410 relist, a watch the server ends at once — and the delay grows until the
// server has been left alone for a while. It is never reset by a request that merely succeeded:
// a server that accepts each watch and fails it at once would reset it every time.
import { monotonicMs } from '../core/clock.js';

const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;
const BACKOFF_RESET_MS = 120_000;

export class WatchBackoff {
  private delayMs = BACKOFF_MIN_MS;
  private lastRetryAt = -Infinity;

  /** The wait before this retry (±20 % jitter); the next one waits twice as long, up to 30 s. */
  next(now = monotonicMs()): number {
    if (now - this.lastRetryAt > BACKOFF_RESET_MS) this.delayMs = BACKOFF_MIN_MS;
    this.lastRetryAt = now;
    const delay = Math.round(this.delayMs * (0.8 + Math.random() * 0.4));
    this.delayMs = Math.min(this.delayMs * 2, BACKOFF_MAX_MS);
    return delay;
  }
}
