// Every change to the state directory happens under one proper-lockfile lock, so concurrent
// CLIs and daemons (`connect` twice at once, `connect` during `quit`) never interleave their
// read-check-write sequences. The lock is a directory (atomic mkdir) whose mtime its holder
// refreshes; one not refreshed for STALE_MS is taken over, so a crashed holder blocks nobody.
import lockfile from 'proper-lockfile';
import type { StateLayout } from './paths.js';
import { StateDirError } from './paths.js';

const STALE_MS = 10_000;
/** The longest pause between two tries: a wait ends at most this long after its deadline would. */
const MAX_RETRY_STEP_MS = 250;

/**
 * Runs fn while holding the state lock; waits (up to ~19 s) for another holder to finish, or,
 * with `until` (epoch ms), gives up by then (a daemon whose stopper will kill it at some point).
 */
export async function withStateLock<T>(l: StateLayout, fn: () => Promise<T> | T, opts: { until?: number } = {}): Promise<T> {
  const waitMs = opts.until === undefined ? Infinity : opts.until - Date.now();
  if (waitMs <= 0) throw new StateDirError(`the state lock of ${l.root} was not taken: no time left to wait for it`);
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(l.root, {
      lockfilePath: l.lockFile,
      realpath: false,
      stale: STALE_MS,
      retries: {
        retries: 80,
        factor: 1.3,
        minTimeout: 15,
        maxTimeout: MAX_RETRY_STEP_MS,
        randomize: true,
        // retry stops once this much has passed at a failed try; the next try may have been due just before.
        ...(waitMs === Infinity ? {} : { maxRetryTime: Math.max(1, waitMs - MAX_RETRY_STEP_MS) }),
      },
      // The default throws from a timer, which would crash a daemon; a compromised lock only
      // means another process took over a lock we held too long, and our writes stay atomic.
      onCompromised: () => undefined,
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Past maxRetryTime, retry may hand back its own "timeout occurred" error (no code) instead.
    if (code === 'ELOCKED' || (waitMs !== Infinity && code === undefined)) {
      throw new StateDirError(`the state directory ${l.root} stays locked by another kubectl-proxyout; try again`);
    }
    throw err;
  }
  try {
    return await fn();
  } finally {
    await release().catch(() => undefined);
  }
}
