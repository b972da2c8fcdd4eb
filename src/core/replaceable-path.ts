// Whether another user could swap a directory for one of theirs: anyone who can rename an entry
// in a directory above it can move it aside and put their own in its place. As OpenSSH checks
// the paths it trusts (misc.c safe_path): every directory up to / must be ours or root's, and
// writable by no one else unless sticky (/tmp).
import path from 'node:path';
import { statSync } from 'node:fs';

export interface ReplaceableAt {
  /** The directory above that lets another user in. */
  dir: string;
  /** Its entry on the way down (what they could move aside). */
  child: string;
  /** Another user owns it (their uid), or group or others can write it (its mode). */
  owner?: number;
  mode?: number;
}

/** The first directory above `dir` (itself excluded) another user could replace it through, or undefined. */
export function replaceableAt(dir: string, uid: number): ReplaceableAt | undefined {
  let child = path.resolve(dir);
  for (let current = path.dirname(child); ; child = current, current = path.dirname(current)) {
    const st = statSync(current);
    if (st.uid !== uid && st.uid !== 0) return { dir: current, child, owner: st.uid };
    if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) return { dir: current, child, mode: st.mode & 0o7777 };
    if (current === path.dirname(current)) return undefined;
  }
}
