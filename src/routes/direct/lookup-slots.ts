// getaddrinfo runs on libuv's threadpool (4 threads unless UV_THREADPOOL_SIZE says otherwise),
// and libuv lets slow work such as it take only half the threads at once: 2 by default, shared by
// every route's name look-ups (API servers, ssh hops). A resolver that never answers holds a
// thread per look-up for its whole timeout (glibc: 5 s, twice): two direct names a browser asked
// for took both, and a cluster route's next tunnel waited behind them past --connect-timeout.
// The direct route's look-ups leave two of those threads to the rest (one with a pool of 4; the
// program starts its pool at 16 threads, core/threadpool.ts); the others wait their turn, and one
// whose stream was given up meanwhile never starts.

import { threadpoolSize } from '../../core/threadpool.js';

/** Slow-work threads left to everything else (when the pool has more than two). */
const KEPT_FOR_OTHERS = 2;

export class LookupSlots {
  private active = 0;
  private readonly waiting: Array<{ signal: AbortSignal; start: () => void }> = [];

  constructor(readonly slots: number) {}

  /** Look-ups under way: the resolver has not answered them yet. */
  get running(): number {
    return this.active;
  }

  /** Calls `lookup` once a slot is free (never, if `signal` aborted first); it calls `release` when done. */
  run(signal: AbortSignal, lookup: (release: () => void) => void): void {
    const start = () => {
      this.active++;
      let released = false;
      lookup(() => {
        if (released) return;
        released = true;
        this.active--;
        this.next();
      });
    };
    if (this.active < this.slots) start();
    else this.waiting.push({ signal, start });
  }

  private next(): void {
    while (this.active < this.slots) {
      const w = this.waiting.shift();
      if (!w) return;
      if (!w.signal.aborted) w.start();
    }
  }
}

/** Shared by every direct route of the process: they draw on the one threadpool. */
export const DIRECT_LOOKUPS = new LookupSlots(Math.max(1, Math.floor((threadpoolSize() + 1) / 2) - KEPT_FOR_OTHERS));
