// Is pid N still the daemon we started? A pid alone is not enough: after the daemon dies (or
// the machine reboots) the number can belong to anything. We record the process's start
// identity when it starts and compare it, and the command line, before ever signalling it.
//
//  - Linux: /proc/<pid>/stat field 22 (start time in clock ticks since boot) prefixed with the
//    boot id, so a pid that starts at the same tick after a reboot still differs;
//    /proc/<pid>/cmdline for the command line; state "Z" (a zombie nobody reaped) counts as gone.
//  - elsewhere (macOS, BSDs): `ps -o lstart=,command= -p PID`.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface ProcessInfo {
  /** Stable for the life of the process, different for any other process. */
  identity: string;
  /** The command line, arguments joined by spaces. */
  command: string;
}

/** Signal 0: true when a process with this pid exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else (so certainly not our daemon, but alive).
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (process.platform === 'linux') {
    const stat = readLinuxStat(pid);
    return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
  }
  return true;
}

/** Identity and command line of a running process, or undefined when it is gone. */
export function processInfo(pid: number): ProcessInfo | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (process.platform === 'linux') {
    const stat = readLinuxStat(pid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') return undefined;
    let command = '';
    try {
      command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
    } catch {
      return undefined;
    }
    return { identity: `${bootId()}:${stat.startTime}`, command };
  }
  try {
    const out = execFileSync('ps', ['-o', 'lstart=,command=', '-p', String(pid)], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 5_000 });
    // lstart is fixed-width: "Wed Nov 26 00:27:01 2025" (24 characters), then the command.
    const line = out.split('\n').find((l) => l.trim() !== '');
    if (!line) return undefined;
    const trimmed = line.trimStart();
    return { identity: trimmed.slice(0, 24).trim(), command: trimmed.slice(24).trim() };
  } catch {
    return undefined;
  }
}

/** The identity to record for a process we just started (or for ourselves). */
export function processIdentity(pid: number): string | undefined {
  return processInfo(pid)?.identity;
}

/**
 * True only when pid runs, has the recorded identity, and its command line is our daemon for
 * this ID (`… daemon --id ID`). Anything else must never be signalled.
 */
export function isOurDaemon(pid: number, identity: string | undefined, id: string): boolean {
  const info = processInfo(pid);
  if (!info) return false;
  if (identity !== undefined && info.identity !== identity) return false;
  return isDaemonCommand(info.command, id);
}

/** The program's own name: the bin script, the bundle, or a single executable (kubectl-proxyout-linux-amd64, .exe). */
const SELF_NAME = /(^|[\\/])kubectl-proxyout(-[a-z]+-[a-z0-9]+)?(\.exe|\.cjs)?$/;

/** `<node> …/kubectl-proxyout daemon --id ID` or `…/kubectl-proxyout-<os>-<arch> daemon --id ID`, as connect spawns it. */
export function isDaemonCommand(command: string, id: string): boolean {
  const words = command.split(/\s+/);
  const at = words.indexOf('daemon');
  if (at < 1 || !words.slice(0, at).some((w) => SELF_NAME.test(w))) return false;
  const after = words.slice(at + 1);
  return after.some((w, i) => (w === '--id' && after[i + 1] === id) || w === `--id=${id}`);
}

interface LinuxStat {
  state: string;
  startTime: string;
}

function readLinuxStat(pid: number): LinuxStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Field 2 is "(comm)" and comm may hold spaces and parentheses: split after the last ")".
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field 22 (starttime) is rest[19].
  const state = rest[0];
  const startTime = rest[19];
  if (!state || !startTime) return undefined;
  return { state, startTime };
}

let cachedBootId: string | undefined;
function bootId(): string {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      cachedBootId = 'unknown-boot';
    }
  }
  return cachedBootId;
}
