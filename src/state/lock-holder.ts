// Who holds a lock directory (state/lock.ts): its pid and process space, in a file beside it (a
// file inside would change the mtime proper-lockfile watches). A holder killed outright (SIGKILL,
// the OOM killer) never lets go, and proper-lockfile takes its lock over only once it is 10 s
// stale: every command and daemon waited that long. A waiter that finds the holder gone here takes
// the lock at once; one of another machine or container sharing the directory is waited out as before.
import { readFileSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import { isAlive } from './process.js';
import { compareSpace, ownProcessSpace, type ProcessSpace } from './process-space.js';
import { writePrivateFile } from './private-file.js';

interface Holder {
  pid: number;
  space: ProcessSpace;
  /** The lock directory's inode: the record is of that lock, not of one made since. */
  ino: number;
}

const holderFile = (lock: string) => `${lock}.holder`;
/** How far after the record a lock's mtime may be and still be the recorded one (its first mtime is rounded up to a second). */
const RECORD_SLACK_MS = 1_500;

/** Records this process as the holder of the lock just taken; what to pass forgetHolder. Best effort (a full disk). */
export function recordHolder(lock: string): string | undefined {
  try {
    const holder: Holder = { pid: process.pid, space: ownProcessSpace(), ino: statSync(lock).ino };
    const text = JSON.stringify(holder);
    writePrivateFile(holderFile(lock), text);
    return text;
  } catch {
    return undefined;
  }
}

/** Removes our record before the lock is let go. */
export function forgetHolder(lock: string, recorded: string | undefined): void {
  if (recorded === undefined) return;
  try {
    if (readFileSync(holderFile(lock), 'utf8') === recorded) unlinkSync(holderFile(lock));
  } catch {
    /* gone already */
  }
}

/** Removes the lock when its recorded holder is known to be gone; true when it did. */
export function removeLockOfTheGone(lock: string): boolean {
  try {
    const holder = JSON.parse(readFileSync(holderFile(lock), 'utf8')) as Holder;
    const taken = statSync(lock);
    // A record of that lock: its directory, touched no later than when it was taken (proper-lockfile
    // sets it up to a second ahead then), not one made since (an inode is reused) that is not recorded yet.
    if (holder.ino !== taken.ino || taken.mtimeMs > statSync(holderFile(lock)).mtimeMs + RECORD_SLACK_MS || typeof holder.pid !== 'number') return false;
    // Only a holder of this boot and pid namespace is known gone: the record carries no machine
    // id, so another boot under the same hostname may be another machine sharing the directory.
    if (compareSpace(holder.space) !== 'here' || isAlive(holder.pid)) return false;
    // The record goes first: of two waiters that both saw it, only the one that removed it goes on.
    unlinkSync(holderFile(lock));
    rmdirSync(lock);
    return true;
  } catch {
    return false; // no record, unreadable, or taken meanwhile: waited for as any held lock
  }
}
