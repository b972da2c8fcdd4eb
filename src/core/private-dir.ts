// A directory of our own, 0700 whatever the umask, where another user may put something at its
// name meanwhile (a shared /tmp). The last mkdir must not take an existing entry (a recursive
// mkdir does), and the mode is set through a descriptor that does not follow a symlink: chmod by
// path followed theirs and closed off its target, before the checks refused the symlink.
import { chmodSync, closeSync, constants, fchmodSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';

/** Creates `dir` (and missing parents) 0700; false when something was at `dir` already (check it). */
export function createPrivateDir(dir: string): boolean {
  mkdirSync(path.dirname(dir), { recursive: true, mode: 0o700 });
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  if (process.platform === 'win32') {
    chmodSync(dir, 0o700); // no directory descriptors there
    return true;
  }
  const fd = openSync(dir, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    fchmodSync(fd, 0o700);
  } finally {
    closeSync(fd);
  }
  return true;
}
