// The controlling terminal, as the kernel sees it (not whether a stream is a TTY).
import { closeSync, openSync } from 'node:fs';
import { isatty } from 'node:tty';

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

let terminalFds: number[] = [];

/** Notes which of fds 0–2 are terminals, as Node does at start to restore their modes at exit. */
export function noteTerminalStdio(): void {
  terminalFds = [0, 1, 2].filter((fd) => isatty(fd));
}

/**
 * Points each of those whose terminal has hung up at /dev/null. Node 20 restores a terminal's
 * modes at exit and aborts when it cannot (EIO: SIGABRT, a core file), as after a proxy outlived
 * its closed terminal (setsid, disown) and was then stopped; it skips an fd that is another file now.
 * Returns the fds released. (process.stdout has a descriptor of its own on a terminal: not this one.)
 */
export function releaseHungUpStdio(): number[] {
  if (process.platform === 'win32') return [];
  const released: number[] = [];
  for (const fd of terminalFds) {
    if (isatty(fd)) continue;
    released.push(fd);
    try {
      closeSync(fd);
      openSync('/dev/null', fd === 0 ? 'r' : 'w'); // the lowest free fd: this one
    } catch {
      // Nothing better to do at exit.
    }
  }
  terminalFds = terminalFds.filter((fd) => !released.includes(fd));
  return released;
}
