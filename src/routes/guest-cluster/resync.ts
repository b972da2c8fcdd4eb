// After a pause (core/pause-detector.ts) a route's cache watches again on new connections; the
// streams asked for meanwhile wait for it, bounded, so that they go to pods that still exist.
// Part of the guest cluster (guest-cluster.ts).
import { abortable } from '../../core/abort.js';
import type { ClusterCache } from '../../cluster/cache.js';

/** After a pause, streams wait at most this long for the watches to be back. */
export const RESYNC_AFTER_PAUSE_MS = 3_000;

export class CacheResync {
  private pending?: Promise<void>;

  constructor(private readonly cache: ClusterCache) {}

  /** The cache's watches watch again now; streams wait for them from now on (wait()). */
  start(): void {
    const resync = this.cache.afterPause(RESYNC_AFTER_PAUSE_MS);
    this.pending = resync;
    void resync.then(() => {
      if (this.pending === resync) this.pending = undefined;
    });
  }

  /** Resolves once watches renewed after a pause are back, bounded by `signal`; at once otherwise. */
  async wait(signal: AbortSignal): Promise<void> {
    if (this.pending) await abortable(this.pending, signal);
  }
}
