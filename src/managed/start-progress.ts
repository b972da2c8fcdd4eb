// How long `connect` waits for a starting daemon: as long as its first sync gets further, as the
// daemon itself does (routes/guest-cluster/guest-cluster.ts syncCache fails a sync only once it
// has got nowhere for 30 s). A fixed deadline SIGKILLed a daemon still syncing a big cluster
// behind a slow link, which the foreground proxy would have served.
import { testHookMs } from '../core/test-hooks.js';
import { monotonicMs } from '../core/clock.js';
import { SyncHeadway } from '../cluster/sync-progress.js';
import { queryStatus } from './control.js';

/** Test hook (core/test-hooks.ts testHookMs): how long connect waits for a daemon that gets no further. */
export const TEST_READY_WAIT_ENV = 'KUBECTL_PROXYOUT_TEST_READY_WAIT_MS';

const READY_WAIT_MS = 45_000;
/** How often the daemon is asked where its sync stands. */
const ASK_EVERY_MS = 1_000;

export class StartProgress {
  readonly waitMs = testHookMs(TEST_READY_WAIT_ENV) ?? READY_WAIT_MS;
  private readonly headway = new SyncHeadway();
  // On the monotonic clock: the date set forward during a start killed a daemon still syncing.
  private deadline = monotonicMs() + this.waitMs;
  private askedAt = -Infinity;

  constructor(private readonly controlSocket: string) {}

  /** True once the daemon has got no further for waitMs (its sync, as it reports it). */
  async stalled(): Promise<boolean> {
    if (monotonicMs() - this.askedAt >= ASK_EVERY_MS) {
      this.askedAt = monotonicMs();
      const cache = (await queryStatus(this.controlSocket, ASK_EVERY_MS))?.cache;
      if (cache && this.headway.moved(cache)) this.deadline = monotonicMs() + this.waitMs;
    }
    return monotonicMs() > this.deadline;
  }
}
