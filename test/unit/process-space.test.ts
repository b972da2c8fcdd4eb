// Whether a pid recorded in a shared state directory can be checked here (state/process-space.ts):
// each platform's branch with a made-up machine, and the registry's use of the verdict with real
// files. The end-to-end case (a real second pid namespace) is integration/shared-state-dir.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { compareSpace, ownProcessSpace, recordedSpace, type ProcessSpace, type SpaceHost } from '../../src/state/process-space.js';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { writeEntry } from '../../src/managed/store.js';
import { inspect } from '../../src/managed/registry.js';
import { stopAll, stopProxy } from '../../src/managed/stop.js';
import { proxyEntry } from '../helpers/proxy-entry.js';

interface Machine {
  platform?: NodeJS.Platform;
  bootId?: string;
  pidNs?: string;
  machineId?: string;
  hostname?: string;
  bootTime?: number;
  /** Commands and their output (ioreg, reg, sysctl); a missing one fails. */
  commands?: Record<string, string>;
}

function host(m: Machine): SpaceHost & { ran: string[] } {
  const files: Record<string, string | undefined> = {
    '/proc/sys/kernel/random/boot_id': m.bootId === undefined ? undefined : `${m.bootId}\n`,
    '/etc/machine-id': m.machineId === undefined ? undefined : `${m.machineId}\n`,
  };
  const ran: string[] = [];
  return {
    ran,
    platform: m.platform ?? 'linux',
    readFile: (file) => {
      const text = files[file];
      if (text === undefined) throw Object.assign(new Error(`ENOENT: ${file}`), { code: 'ENOENT' });
      return text;
    },
    readLink: (file) => {
      if (file !== '/proc/self/ns/pid' || m.pidNs === undefined) throw new Error(`EACCES: ${file}`);
      return m.pidNs;
    },
    run: (file, args) => {
      ran.push(file);
      const out = m.commands?.[[file, ...args].join(' ')];
      if (out === undefined) throw new Error(`${file}: not found`);
      return out;
    },
    hostname: () => m.hostname ?? 'laptop',
    uptime: () => 1_000,
    now: () => ((m.bootTime ?? 1_700_000_000) + 1_000) * 1000,
  };
}

const linux: Machine = { bootId: 'boot-1', pidNs: 'pid:[4026531836]', machineId: 'machine-a', hostname: 'laptop' };
const recorded = (m: Machine): ProcessSpace => recordedSpace(host(m));

test('Linux: the same boot and pid namespace is here; another pid namespace on that kernel is elsewhere', () => {
  assert.equal(compareSpace(recorded(linux), host(linux)), 'here');
  // A container: the kernel's boot id, its own pid namespace (and often the image's machine id).
  const container = { ...linux, pidNs: 'pid:[4026532511]', hostname: 'c0ffee' };
  assert.equal(compareSpace(recorded(container), host(linux)), 'elsewhere');
  assert.equal(compareSpace(recorded(linux), host(container)), 'elsewhere');
});

test('Linux: another boot of the same machine is an earlier boot; of another machine, elsewhere', () => {
  const rebooted = { ...linux, bootId: 'boot-2' };
  assert.equal(compareSpace(recorded(linux), host(rebooted)), 'earlier-boot');
  // An NFS home mounted on a second machine: another machine id, whatever the hostname.
  assert.equal(compareSpace(recorded(linux), host({ ...rebooted, machineId: 'machine-b' })), 'elsewhere');
  assert.equal(compareSpace(recorded(linux), host({ ...rebooted, machineId: 'machine-b', hostname: 'laptop' })), 'elsewhere');
});

test('Linux without a machine id (many containers): the hostname tells a restart from another machine', () => {
  const noId = { ...linux, machineId: undefined, hostname: 'c0ffee' };
  assert.equal(recorded(noId).machine, undefined);
  assert.equal(compareSpace(recorded(noId), host({ ...noId, bootId: 'boot-2', pidNs: 'pid:[4026532999]' })), 'earlier-boot');
  assert.equal(compareSpace(recorded(noId), host({ ...noId, bootId: 'boot-2', hostname: 'other' })), 'elsewhere');
  // One side with an id, the other without: nothing to compare but the hostnames.
  assert.equal(compareSpace(recorded(linux), host({ ...noId, bootId: 'boot-2', hostname: 'laptop' })), 'earlier-boot');
});

test('the machine id is looked up only when the boot differs', () => {
  const mac: Machine = { platform: 'darwin', commands: { 'ioreg -rd1 -c IOPlatformExpertDevice': '  "IOPlatformUUID" = "UUID-A"\n' } };
  const here = host(mac);
  compareSpace(recorded(mac), here);
  assert.deepEqual(here.ran, [], 'same boot: no ioreg');
  const later = host({ ...mac, bootTime: 1_700_009_000 });
  assert.equal(compareSpace(recorded(mac), later), 'earlier-boot');
  assert.deepEqual(later.ran, ['ioreg']);
});

test('macOS and other platforms: the boot time within a minute, then the machine id', () => {
  const mac: Machine = { platform: 'darwin', hostname: 'mbp', commands: { 'ioreg -rd1 -c IOPlatformExpertDevice': '"IOPlatformUUID" = "UUID-A"' } };
  assert.equal(recorded(mac).machine, 'UUID-A');
  assert.equal(recorded(mac).pidNamespace, undefined);
  assert.equal(compareSpace(recorded(mac), host({ ...mac, bootTime: 1_700_000_040 })), 'here', 'a clock step of 40 s is the same boot');
  // macOS renames the host with the network: the machine id decides.
  assert.equal(compareSpace(recorded(mac), host({ ...mac, bootTime: 1_700_050_000, hostname: 'mbp-2' })), 'earlier-boot');
  const otherMac = { ...mac, bootTime: 1_700_050_000, commands: { 'ioreg -rd1 -c IOPlatformExpertDevice': '"IOPlatformUUID" = "UUID-B"' } };
  assert.equal(compareSpace(recorded(mac), host(otherMac)), 'elsewhere');
  // A Linux container on that Mac, sharing $HOME: another platform is always elsewhere.
  assert.equal(compareSpace(recorded(mac), host(linux)), 'elsewhere');
  assert.equal(compareSpace(recorded(linux), host(mac)), 'elsewhere');

  const win: Machine = {
    platform: 'win32',
    commands: { 'reg query HKLM\\SOFTWARE\\Microsoft\\Cryptography /v MachineGuid': '\r\n    MachineGuid    REG_SZ    1234-abcd\r\n' },
  };
  assert.equal(recorded(win).machine, '1234-abcd');
  const bsd: Machine = { platform: 'freebsd', commands: { 'sysctl -n kern.hostuuid': 'bsd-uuid\n' } };
  assert.equal(recorded(bsd).machine, 'bsd-uuid');
  assert.equal(recorded({ ...bsd, commands: {} }).machine, undefined, 'no id: undefined, not an error');
});

test('an entry recorded before spaces were: its pid is checked here, as it always was', () => {
  assert.equal(compareSpace(undefined, host(linux)), 'here');
  assert.equal(ownProcessSpace(host(linux)).machine, undefined, 'our own space leaves the machine id until it is needed');
});

test('registry and stop: an entry from elsewhere is never reaped, refused by disconnect, dropped by --forget', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-space-unit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const l = layout(dir);
  ensureStateDir(l);
  const elsewhere: ProcessSpace = { ...recordedSpace(), pidNamespace: 'pid:[1]', hostname: 'devcontainer' };
  // pid 1 is init here: as a recorded daemon pid it is certainly not ours.
  writeEntry(l, proxyEntry('aaaa0001', { phase: 'running', pid: 1, space: elsewhere }));
  writeFileSync(l.kubeconfigFile('aaaa0001'), 'credentials', { mode: 0o600 });
  writeEntry(l, proxyEntry('aaaa0002', { phase: 'running', pid: 1, space: recordedSpace() }));

  const found = inspect(l, 'aaaa0001');
  assert.equal(found?.state, 'elsewhere');
  assert.ok(existsSync(l.kubeconfigFile('aaaa0001')), 'its kubeconfig stays for the daemon that uses it');
  assert.equal(inspect(l, 'aaaa0002')?.state, 'dead', 'recorded here and not running: dead, as before');

  await assert.rejects(stopProxy(l, 'aaaa0001'), /proxy aaaa0001 runs elsewhere \(recorded on host devcontainer, .*disconnect it there.*--forget/);
  const all = await stopAll(l);
  assert.deepEqual(all.map((s) => [s.id, s.outcome]).sort(), [
    ['aaaa0001', 'left-elsewhere'],
    ['aaaa0002', 'was-dead'],
  ]);
  assert.ok(existsSync(l.kubeconfigFile('aaaa0001')));
  const forgotten = await stopProxy(l, 'aaaa0001', { forget: true });
  assert.equal(forgotten.outcome, 'forgotten');
  assert.equal(inspect(l, 'aaaa0001'), undefined);
});
