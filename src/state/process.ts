// Is pid N still the daemon we started? A pid alone is not enough: after the daemon dies (or
// the machine reboots) the number can belong to anything. We record the process's start
// identity when it starts and compare it, and the command line, before ever signalling it.
//
//  - Linux: /proc/<pid>/stat field 22 (start time in clock ticks since boot) prefixed with the
//    boot id, so a pid that starts at the same tick after a reboot still differs;
//    /proc/<pid>/cmdline for the command line; state "Z" (a zombie nobody reaped) counts as gone.
//  - Windows: the process's CreationDate and CommandLine from CIM (Win32_Process), via PowerShell.
//  - elsewhere (macOS, BSDs): `ps -o lstart=,command= -p PID`, in the C locale and UTC: lstart is
//    strftime's %c of the local time, so the caller's TZ or LC_TIME (a laptop that changed time
//    zone, a command run with another locale) would otherwise change the text, and a live daemon
//    would look like another process.
// processGroupInfo reads, the same ways, where a process stands among terminal signals (its
// process group, its terminal's foreground group, session leadership) for exec (cli/exec-signals.ts).
// The platform and the ways to run a command or read a file are parameters (ProcessHost), so each
// branch is tested on any machine.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

export interface ProcessHost {
  platform: NodeJS.Platform;
  /** Runs a program (with `env` added to the environment), returns its stdout; throws when it fails. */
  run(file: string, args: string[], env?: Record<string, string>): string;
  readFile(file: string): string;
}

export const systemHost: ProcessHost = {
  platform: process.platform,
  run: (file, args, env) =>
    execFileSync(file, args, {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5_000,
      windowsHide: true,
      ...(env ? { env: { ...process.env, ...env } } : {}),
    }),
  readFile: (file) => readFileSync(file, 'utf8'),
};

export interface ProcessInfo {
  /** Stable for the life of the process, different for any other process. */
  identity: string;
  /** The command line, arguments joined by spaces. */
  command: string;
}

/** Signal 0: true when a process with this pid exists and is not a zombie. */
export function isAlive(pid: number, host: ProcessHost = systemHost): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    // EPERM: it exists but belongs to someone else (so certainly not our daemon, but alive).
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (host.platform === 'linux') {
    const stat = readLinuxStat(pid, host);
    return stat !== undefined && stat.state !== 'Z' && stat.state !== 'X';
  }
  return true;
}

/** Identity and command line of a running process, or undefined when it is gone. */
export function processInfo(pid: number, host: ProcessHost = systemHost): ProcessInfo | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  if (host.platform === 'linux') {
    const stat = readLinuxStat(pid, host);
    if (!stat || stat.state === 'Z' || stat.state === 'X') return undefined;
    let command = '';
    try {
      command = host.readFile(`/proc/${pid}/cmdline`).split('\0').filter(Boolean).join(' ');
    } catch {
      return undefined;
    }
    return { identity: `${bootId(host)}:${stat.startTime}`, command };
  }
  if (host.platform === 'win32') return windowsProcessInfo(pid, host);
  return psProcessInfo(pid, host, PS_ENV);
}

/** The same lstart text whoever asks: C locale, UTC (macOS `ps`, see the top of this file). */
const PS_ENV = { LC_ALL: 'C', TZ: 'UTC0' };

/** `ps -o lstart=,command=`; without `env`, in the caller's own locale and zone. */
function psProcessInfo(pid: number, host: ProcessHost, env?: Record<string, string>): ProcessInfo | undefined {
  try {
    const out = host.run('ps', ['-o', 'lstart=,command=', '-p', String(pid)], env);
    // lstart is fixed-width: "Wed Nov 26 00:27:01 2025" (24 characters), then the command.
    const line = out.split('\n').find((l) => l.trim() !== '');
    if (!line) return undefined;
    const trimmed = line.trimStart();
    return { identity: trimmed.slice(0, 24).trim(), command: trimmed.slice(24).trim() };
  } catch {
    return undefined;
  }
}

/**
 * Windows: CreationDate (to the microsecond, stable for the life of the process) and CommandLine
 * of Win32_Process, one per line; nothing when there is no such process.
 */
function windowsProcessInfo(pid: number, host: ProcessHost): ProcessInfo | undefined {
  const script = `$p = Get-CimInstance Win32_Process -Filter 'ProcessId=${pid}'; if ($p) { $p.CreationDate.ToUniversalTime().ToString('o'); $p.CommandLine }`;
  try {
    const [created, ...command] = host.run('powershell.exe', ['-NoProfile', '-NonInteractive', '-Command', script]).split(/\r?\n/);
    if (!created?.trim()) return undefined;
    return { identity: created.trim(), command: command.join(' ').trim() };
  } catch {
    return undefined;
  }
}

/** The identity to record for a process we just started (or for ourselves). */
export function processIdentity(pid: number, host: ProcessHost = systemHost): string | undefined {
  return processInfo(pid, host)?.identity;
}

/**
 * True only when pid runs, has the recorded identity, and its command line is our daemon for
 * this ID (`… daemon --id ID`). Anything else must never be signalled. `program`: the file name
 * `connect` recorded starting it as (store.ts), also accepted for our own.
 */
export function isOurDaemon(pid: number, identity: string | undefined, id: string, host: ProcessHost = systemHost, program?: string): boolean {
  const info = processInfo(pid, host);
  if (!info) return false;
  if (identity !== undefined && info.identity !== identity && !startedAsRecordedBefore(pid, identity, host)) return false;
  return isDaemonCommand(info.command, id, program);
}

/**
 * Daemons started by earlier versions recorded `ps`'s lstart in the caller's locale and time zone
 * (macOS, BSDs). Read that way it is still this very process's start time, so such a daemon stays
 * ours across an upgrade instead of being orphaned; new daemons record the C-locale UTC text.
 */
function startedAsRecordedBefore(pid: number, identity: string, host: ProcessHost): boolean {
  if (host.platform === 'linux' || host.platform === 'win32') return false;
  return psProcessInfo(pid, host)?.identity === identity;
}

/** The program's own name: the bin script, the bundle, or a single executable (kubectl-proxyout-linux-amd64, .exe). */
const SELF_NAME = /(^|[\\/])kubectl-proxyout(-[a-z]+-[a-z0-9]+)?(\.exe|\.cjs)?$/;

/**
 * `<node> …/kubectl-proxyout daemon --id ID` or `…/kubectl-proxyout-<os>-<arch> daemon --id ID`, as
 * connect spawns it; or `…/<program> daemon --id ID`: a single executable renamed (`kubectl-pxy`)
 * runs its daemon under that name.
 */
export function isDaemonCommand(command: string, id: string, program?: string): boolean {
  // Windows quotes a word with a space in it ("C:\Program Files\nodejs\node.exe" "C:\Users\J Doe\…"):
  // split at the spaces, the program's name is still the end of a word once its quote is off.
  const words = command.split(/\s+/).map((w) => w.replace(/^"|"$/g, ''));
  const at = words.indexOf('daemon');
  const ours = (w: string) => SELF_NAME.test(w) || (!!program && (w === program || w.endsWith(`/${program}`) || w.endsWith(`\\${program}`)));
  if (at < 1 || !words.slice(0, at).some(ours)) return false;
  const after = words.slice(at + 1);
  return after.some((w, i) => (w === '--id' && after[i + 1] === id) || w === `--id=${id}`);
}

interface LinuxStat {
  state: string;
  startTime: string;
  pgrp: number;
  session: number;
  /** The foreground process group of the controlling terminal; -1 without one. */
  tpgid: number;
}

function readLinuxStat(pid: number, host: ProcessHost): LinuxStat | undefined {
  let text: string;
  try {
    text = host.readFile(`/proc/${pid}/stat`);
  } catch {
    return undefined;
  }
  // Field 2 is "(comm)" and comm may hold spaces and parentheses: split after the last ")".
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] is field 3 (state), so field 22 (starttime) is rest[19]; pgrp, session and tpgid are
  // fields 5, 6 and 8.
  const state = rest[0];
  const startTime = rest[19];
  if (!state || !startTime) return undefined;
  return { state, startTime, pgrp: Number(rest[2]), session: Number(rest[3]), tpgid: Number(rest[5]) };
}

/** A process's place among terminal signals (cli/exec-signals.ts). */
export interface ProcessGroupInfo {
  pgrp: number;
  /** The foreground process group of its controlling terminal; 0 or -1 when it has none. */
  terminalGroup: number;
  sessionLeader: boolean;
}

/**
 * Linux: /proc/<pid>/stat (pgrp, session, tpgid). macOS and BSDs: `ps -o pgid=,tpgid=,stat=`
 * (an "s" in stat marks a session leader). Windows has no process groups of this kind: undefined,
 * as for a process that is gone.
 */
export function processGroupInfo(pid: number, host: ProcessHost = systemHost): ProcessGroupInfo | undefined {
  if (!Number.isInteger(pid) || pid <= 0 || host.platform === 'win32') return undefined;
  if (host.platform === 'linux') {
    const stat = readLinuxStat(pid, host);
    if (!stat || !(stat.pgrp > 0)) return undefined;
    return { pgrp: stat.pgrp, terminalGroup: stat.tpgid, sessionLeader: stat.session === pid };
  }
  try {
    const [pgid, tpgid, stat] = host
      .run('ps', ['-o', 'pgid=,tpgid=,stat=', '-p', String(pid)])
      .trim()
      .split(/\s+/);
    if (!(Number(pgid) > 0) || stat === undefined) return undefined;
    return { pgrp: Number(pgid), terminalGroup: Number(tpgid), sessionLeader: stat.includes('s') };
  } catch {
    return undefined;
  }
}

let cachedBootId: string | undefined;
function bootId(host: ProcessHost): string {
  if (host !== systemHost) return readBootId(host);
  cachedBootId ??= readBootId(host);
  return cachedBootId;
}

function readBootId(host: ProcessHost): string {
  try {
    return host.readFile('/proc/sys/kernel/random/boot_id').trim();
  } catch {
    return 'unknown-boot';
  }
}
