// Where a recorded pid means something. A state directory can be shared by processes that cannot
// see each other's pids: an NFS home on two machines, a container that mounts $HOME, a Linux
// container on a Mac. A pid recorded there says nothing here, so a daemon must not be declared
// dead (and its files removed) because no such process runs here.
//
// A process space is one kernel boot and, on Linux, one pid namespace:
//  - Linux: /proc/sys/kernel/random/boot_id (shared by every container on a kernel) and the pid
//    namespace of /proc/self/ns/pid (what tells a container from its host and from its siblings);
//  - elsewhere: the boot time (now − os.uptime()), within a minute.
// A different space of the same machine is an earlier boot, where every process is gone. The
// machine: /etc/machine-id (Linux), IOPlatformUUID (macOS), MachineGuid (Windows), kern.hostuuid
// (BSDs); the hostname when there is none (a container without a machine-id: its hostname is
// kept across restarts). Looked up only when the boot differs.
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import { systemHost, type ProcessHost } from './process.js';

export interface ProcessSpace {
  platform: string;
  /** Linux: the boot id; elsewhere: the boot time in seconds since the epoch. */
  boot: string;
  /** Linux: the pid namespace, e.g. "pid:[4026531836]". */
  pidNamespace?: string;
  /** The machine's own identifier; absent when it has none we can read. */
  machine?: string;
  /** For people: where it was recorded. */
  hostname: string;
}

export interface SpaceHost extends ProcessHost {
  readLink(file: string): string;
  hostname(): string;
  /** Seconds since boot. */
  uptime(): number;
  now(): number;
}

export const systemSpaceHost: SpaceHost = {
  ...systemHost,
  readLink: (file) => readlinkSync(file),
  hostname: () => os.hostname(),
  uptime: () => os.uptime(),
  now: () => Date.now(),
};

/** here: our pids are its pids · earlier-boot: this machine's, before a reboot · elsewhere: another machine or container. */
export type SpaceVerdict = 'here' | 'earlier-boot' | 'elsewhere';

/** Boot times read on one boot differ by the clock's steps; a minute is far less than a reboot takes to matter. */
const BOOT_TIME_SLACK_S = 60;

let own: ProcessSpace | undefined;

/** This process's space (the machine id is looked up only when a comparison needs it). */
export function ownProcessSpace(host: SpaceHost = systemSpaceHost): ProcessSpace {
  if (host === systemSpaceHost && own) return own;
  const space: ProcessSpace = { platform: host.platform, boot: readBoot(host), hostname: host.hostname() };
  if (host.platform === 'linux') {
    const ns = tryRead(() => host.readLink('/proc/self/ns/pid'));
    if (ns) space.pidNamespace = ns;
  }
  if (host === systemSpaceHost) own = space;
  return space;
}

/** What a daemon records: its space with the machine id, so others can tell a reboot from another machine. */
export function recordedSpace(host: SpaceHost = systemSpaceHost): ProcessSpace {
  const space = { ...ownProcessSpace(host) };
  const machine = machineId(host);
  if (machine) space.machine = machine;
  return space;
}

/** Whether pids recorded in `recorded` can be checked here. An entry without one predates this record: here. */
export function compareSpace(recorded: ProcessSpace | undefined, host: SpaceHost = systemSpaceHost): SpaceVerdict {
  if (!recorded) return 'here';
  const mine = ownProcessSpace(host);
  if (recorded.platform !== mine.platform) return 'elsewhere';
  if (sameBoot(recorded, mine)) return recorded.pidNamespace === mine.pidNamespace ? 'here' : 'elsewhere';
  const machine = machineId(host);
  const same = recorded.machine && machine ? recorded.machine === machine : recorded.hostname === mine.hostname;
  return same ? 'earlier-boot' : 'elsewhere';
}

function sameBoot(a: ProcessSpace, b: ProcessSpace): boolean {
  if (a.platform === 'linux') return a.boot === b.boot;
  return Math.abs(Number(a.boot) - Number(b.boot)) <= BOOT_TIME_SLACK_S;
}

function readBoot(host: SpaceHost): string {
  if (host.platform === 'linux') return tryRead(() => host.readFile('/proc/sys/kernel/random/boot_id').trim()) ?? 'unknown-boot';
  return String(Math.round(host.now() / 1000 - host.uptime()));
}

let ownMachine: string | null | undefined;
function machineId(host: SpaceHost): string | undefined {
  if (host !== systemSpaceHost) return readMachineId(host);
  if (ownMachine === undefined) ownMachine = readMachineId(host) ?? null;
  return ownMachine ?? undefined;
}

function readMachineId(host: SpaceHost): string | undefined {
  const id = (() => {
    switch (host.platform) {
      case 'linux':
        return tryRead(() => host.readFile('/etc/machine-id')) ?? tryRead(() => host.readFile('/var/lib/dbus/machine-id'));
      case 'darwin':
        return tryRead(() => /"IOPlatformUUID"\s*=\s*"([^"]+)"/.exec(host.run('ioreg', ['-rd1', '-c', 'IOPlatformExpertDevice']))?.[1]);
      case 'win32':
        return tryRead(
          () => /MachineGuid\s+REG_SZ\s+(\S+)/.exec(host.run('reg', ['query', 'HKLM\\SOFTWARE\\Microsoft\\Cryptography', '/v', 'MachineGuid']))?.[1],
        );
      default:
        return tryRead(() => host.run('sysctl', ['-n', 'kern.hostuuid']));
    }
  })()?.trim();
  return id ? id : undefined;
}

function tryRead<T>(read: () => T): T | undefined {
  try {
    return read();
  } catch {
    return undefined;
  }
}
