// Slows down password guessing against the proxy's own authentication (RFC 1929, HTTP Basic).
// Every attempt is checked at once and a right password passes at once: the throttle never
// refuses or delays it, so an attacker's pending guesses cannot lock the owner out. Only wrong
// answers are throttled: each is answered after `delayMs`, and one source (auth/source.ts: all
// of loopback is one source, IPv6 a /64, IPv4 an address) has at most `maxPendingPerSource`
// wrong answers running at a time; further wrong answers queue behind them. So a client that
// waits for its answers learns at most maxPending / delay wrong passwords per second (4/s by
// default) however many connections it opens; the listeners cap a source's unauthenticated
// connections (listeners/unauthenticated-cap.ts), which bounds the queue.
import { sourceBucket } from './source.js';

export interface ThrottleOptions {
  /** How long a wrong password waits for its answer. */
  delayMs: number;
  /** Wrong answers one source may have running at a time; further ones wait their turn. */
  maxPendingPerSource: number;
}

export const THROTTLE_DEFAULTS: ThrottleOptions = { delayMs: 1_000, maxPendingPerSource: 4 };

interface WrongAnswer {
  answer: () => void;
  /** True once the client left: its turn is skipped rather than spent. */
  gone: () => boolean;
}

interface SourceQueue {
  running: number;
  waiting: WrongAnswer[];
}

export class FailedAuthThrottle {
  private readonly sources = new Map<string, SourceQueue>();

  constructor(private readonly options: ThrottleOptions = THROTTLE_DEFAULTS) {}

  /**
   * Call after a wrong password: `answer` runs after the delay, later when the source already has
   * maxPending wrong answers running. `answer` must cope with a client that has gone meanwhile.
   */
  delayFailure(address: string | undefined, answer: () => void, gone: () => boolean = () => false): void {
    const key = sourceBucket(address);
    let queue = this.sources.get(key);
    if (!queue) this.sources.set(key, (queue = { running: 0, waiting: [] }));
    const wrong = { answer, gone };
    if (queue.running < this.options.maxPendingPerSource) return this.run(key, queue, wrong);
    // Clients that left keep no memory: drop them before the queue grows.
    if (queue.waiting.length >= this.options.maxPendingPerSource) queue.waiting = queue.waiting.filter((w) => !w.gone());
    queue.waiting.push(wrong);
  }

  /** Wrong answers of this address's source that are running or queued. */
  pending(address: string | undefined): number {
    const queue = this.sources.get(sourceBucket(address));
    return queue ? queue.running + queue.waiting.length : 0;
  }

  private run(key: string, queue: SourceQueue, wrong: WrongAnswer): void {
    queue.running++;
    const timer = setTimeout(() => {
      queue.running--;
      wrong.answer();
      let next: WrongAnswer | undefined;
      while ((next = queue.waiting.shift()) && next.gone());
      if (next) this.run(key, queue, next);
      else if (queue.running === 0) this.sources.delete(key);
    }, this.options.delayMs);
    timer.unref();
  }
}
