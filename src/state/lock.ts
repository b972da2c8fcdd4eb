// Every change to the state directory happens under one proper-lockfile lock, so concurrent
// CLIs and daemons (`connect` twice at once, `connect` during `quit`) never interleave their
// read-check-write sequences. The lock is a directory (atomic mkdir) whose mtime its holder
// refreshes; one not refreshed for STALE_MS is taken over, so a crashed holder blocks nobody (one
// whose recorded holder is gone here, at once: lock-holder.ts).
import { rmdirSync, statSync } from 'node:fs';
import path from 'node:path';
import lockfile from 'proper-lockfile';
import { forgetHolder, recordHolder, removeLockOfTheGone } from './lock-holder.js';
import type { StateLayout } from './paths.js';
import { StateDirError } from './paths.js';

const STALE_MS = 10_000;
/** The longest pause between two tries: a wait ends at most this long after its deadline would. */
const MAX_RETRY_STEP_MS = 250;
const FIRST_RETRY_STEP_MS = 15;
/** ~19 s of tries in all when no deadline is given (a holder finishing its work, or going stale). */
const MAX_TRIES = 80;

/**
 * Runs fn while holding the state lock; waits (up to ~19 s) for another holder to finish, or,
 * with `until` (epoch ms), gives up by then (a daemon whose stopper will kill it at some point).
 * Only a lock held by another is waited for: a directory that cannot be written (read-only, full,
 * not ours) fails at once, naming it.
 */
export async function withStateLock<T>(l: StateLayout, fn: () => Promise<T> | T, opts: { until?: number } = {}): Promise<T> {
  const deadline = opts.until ?? Infinity;
  if (deadline - Date.now() <= 0) throw new StateDirError(`the state lock of ${l.root} was not taken: no time left to wait for it`);
  let release: (() => Promise<void>) | undefined;
  let step = FIRST_RETRY_STEP_MS;
  for (let tries = 1; !release; tries++) {
    try {
      release = await lockfile.lock(l.root, {
        lockfilePath: l.lockFile,
        realpath: false,
        stale: STALE_MS,
        // The default throws from a timer, which would crash a daemon; a compromised lock only
        // means another process took over a lock we held too long, and our writes stay atomic.
        onCompromised: () => undefined,
      });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      // A file system remounted read-only (ext4's errors=remount-ro) under running daemons: no
      // command here can change it, so there is nothing to lock against, and refusing made them
      // impossible to list or stop. What fn writes fails (EROFS); a stop does without.
      if (e.code === 'EROFS') return await fn();
      if (e.code !== 'ELOCKED') throw new StateDirError(`cannot take the state lock in ${l.root}: ${e.message}`);
      if (removeLockFromTheFuture(l.lockFile) || removeLockOfTheGone(l.lockFile)) continue;
      const pause = Math.min(step * (1 + Math.random()), MAX_RETRY_STEP_MS);
      if (tries >= MAX_TRIES || Date.now() + pause > deadline) {
        throw new StateDirError(`the state directory ${l.root} stays locked by another kubectl-proxyout; try again`);
      }
      await new Promise((r) => setTimeout(r, pause));
      step = Math.min(step * 1.3, MAX_RETRY_STEP_MS);
    }
  }
  const holder = recordHolder(l.lockFile);
  try {
    return await fn();
  } finally {
    forgetHolder(l.lockFile, holder);
    await release().catch(() => undefined);
  }
}

/**
 * Runs fn holding the lock `file` (a directory, as the state lock), waiting for another holder up
 * to waitMs; onWait is called once when it has to wait. The directory `file` is in gone: gone()
 * is thrown. On a read-only file system fn runs without it, as under withStateLock.
 */
export async function withLockFile<T>(
  file: string,
  fn: () => Promise<T>,
  opts: { waitMs: number; busy: () => Error; gone: () => Error; onWait?: () => void },
): Promise<T> {
  const deadline = Date.now() + opts.waitMs;
  let release: (() => Promise<void>) | undefined;
  let waited = false;
  while (!release) {
    try {
      release = await lockfile.lock(path.dirname(file), { lockfilePath: file, realpath: false, stale: STALE_MS, onCompromised: () => undefined });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code === 'EROFS') return await fn();
      if (e.code === 'ENOENT') throw opts.gone();
      if (e.code !== 'ELOCKED') throw err;
      if (removeLockFromTheFuture(file) || removeLockOfTheGone(file)) continue;
      if (Date.now() >= deadline) throw opts.busy();
      if (!waited) opts.onWait?.();
      waited = true;
      await new Promise((r) => setTimeout(r, MAX_RETRY_STEP_MS));
    }
  }
  const holder = recordHolder(file);
  try {
    return await fn();
  } finally {
    forgetHolder(file, holder);
    await release().catch(() => undefined);
  }
}

/**
 * proper-lockfile calls a lock stale only when its mtime is STALE_MS in the past. One left by a
 * holder killed while the clock ran ahead (a dual-boot machine's RTC read as UTC until NTP steps
 * it back, a VM restored from a snapshot) stayed "held" until the clock caught up — hours of every
 * command refused. A live holder refreshes its lock to its present every STALE_MS / 2.
 */
function removeLockFromTheFuture(file: string): boolean {
  try {
    if (statSync(file).mtimeMs - Date.now() <= STALE_MS) return false;
    rmdirSync(file);
    return true;
  } catch {
    return false; // gone or taken meanwhile: tried again as any held lock
  }
}
