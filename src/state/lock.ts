// Every change to the state directory happens under one proper-lockfile lock, so concurrent
// CLIs and daemons (`connect` twice at once, `connect` during `quit`) never interleave their
// read-check-write sequences. The lock is a directory (atomic mkdir) whose mtime its holder
// refreshes; one not refreshed for STALE_MS is taken over, so a crashed holder blocks nobody.
import lockfile from 'proper-lockfile';
import type { StateLayout } from './paths.js';
import { StateDirError } from './paths.js';

const STALE_MS = 10_000;

/** Runs fn while holding the state lock; waits (up to ~20 s) for another holder to finish. */
export async function withStateLock<T>(l: StateLayout, fn: () => Promise<T> | T): Promise<T> {
  let release: () => Promise<void>;
  try {
    release = await lockfile.lock(l.root, {
      lockfilePath: l.lockFile,
      realpath: false,
      stale: STALE_MS,
      retries: { retries: 80, factor: 1.3, minTimeout: 15, maxTimeout: 250, randomize: true },
      // The default throws from a timer, which would crash a daemon; a compromised lock only
      // means another process took over a lock we held too long, and our writes stay atomic.
      onCompromised: () => undefined,
    });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOCKED') {
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
