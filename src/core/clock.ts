// Durations come from the monotonic clock: the wall clock jumps (NTP, a laptop waking the next
// day, a user setting the time) and would stretch or cut every backoff, hold and timeout measured
// with it. Points in time shown to people ("since 14:03") stay on the wall clock.
import { performance } from 'node:perf_hooks';

/** Milliseconds on a clock that only moves forward (not since the epoch: only differences mean anything). */
export function monotonicMs(): number {
  return performance.now();
}
