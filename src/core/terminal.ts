// The controlling terminal, as the kernel sees it (not whether a stream is a TTY).
import { closeSync, openSync } from 'node:fs';

/** Whether this process has a controlling terminal (one that has hung up is gone: ENXIO/EIO). */
export function hasControllingTerminal(): boolean {
  if (process.platform === 'win32') return false;
  try {
    closeSync(openSync('/dev/tty', 'r'));
    return true;
  } catch {
    return false;
  }
}
