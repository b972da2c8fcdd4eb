// Each platform branch, on any machine, by injecting the platform: process identity from /proc
// (Linux), `ps` (macOS, BSDs) and CIM through PowerShell (Windows); the control endpoint as a
// unix socket or a Windows named pipe; a graceful stop by signal or, on Windows, by a request on
// the control pipe; the daemon's detached spawn.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isDaemonCommand, isOurDaemon, processInfo, systemHost, type ProcessHost } from '../../src/state/process.js';
import { checkSocketPath, controlEndpoint, isNamedPipe, layout } from '../../src/state/paths.js';
import { startControlServer } from '../../src/managed/control.js';
import { askToStop } from '../../src/managed/stop.js';
import { detachedSpawnOptions } from '../../src/managed/connect.js';

function host(
  platform: NodeJS.Platform,
  answers: { run?: (file: string, args: string[]) => string; files?: Record<string, string> },
): ProcessHost & { calls: Array<[string, string[]]>; envs: Array<Record<string, string> | undefined> } {
  const calls: Array<[string, string[]]> = [];
  const envs: Array<Record<string, string> | undefined> = [];
  return {
    platform,
    calls,
    envs,
    run(file, args, env) {
      calls.push([file, args]);
      envs.push(env);
      if (!answers.run) throw new Error('no such program');
      return answers.run(file, args);
    },
    readFile(file) {
      const text = answers.files?.[file];
      if (text === undefined) throw Object.assign(new Error(`ENOENT ${file}`), { code: 'ENOENT' });
      return text;
    },
  };
}

test('macOS: identity and command line from `ps -o lstart=,command= -p PID`', () => {
  const mac = host('darwin', { run: () => 'Wed Nov 26 08:01:07 2025 /usr/local/bin/kubectl-proxyout daemon --id a1\n' });
  assert.deepEqual(processInfo(4242, mac), { identity: 'Wed Nov 26 08:01:07 2025', command: '/usr/local/bin/kubectl-proxyout daemon --id a1' });
  assert.deepEqual(mac.calls, [['ps', ['-o', 'lstart=,command=', '-p', '4242']]]);
  assert.deepEqual(mac.envs, [{ LC_ALL: 'C', TZ: 'UTC0' }], "the same text whatever the caller's locale and time zone");
  assert.equal(isOurDaemon(4242, 'Wed Nov 26 08:01:07 2025', 'a1', mac), true);
  assert.equal(isOurDaemon(4242, 'Thu Nov 27 09:00:00 2025', 'a1', mac), false, 'another process under a reused pid');
  assert.equal(processInfo(4242, host('darwin', { run: () => '' })), undefined, 'no such process: ps prints nothing');
  // A daemon an earlier version started recorded lstart in the caller's zone: still ours.
  const zoned = host('darwin', {});
  zoned.run = (file, args, env) => {
    zoned.calls.push([file, args]);
    return `${env?.TZ === 'UTC0' ? 'Wed Nov 26 08:01:07 2025' : 'Wed Nov 26 09:01:07 2025'} /usr/local/bin/kubectl-proxyout daemon --id a1\n`;
  };
  assert.equal(isOurDaemon(4242, 'Wed Nov 26 09:01:07 2025', 'a1', zoned), true, 'recorded in local time by an earlier version');
  assert.equal(isOurDaemon(4242, 'Wed Nov 26 10:01:07 2025', 'a1', zoned), false, 'neither reading matches: another process');
  assert.equal(processInfo(4242, host('darwin', {})), undefined, 'ps fails');
});

test("the ps branch with this machine's real ps: a daemon's identity does not change with the caller's time zone or locale", (t) => {
  if (process.platform === 'win32') return t.skip('no ps on Windows');
  try {
    systemHost.run('ps', ['-o', 'lstart=', '-p', String(process.pid)]);
  } catch {
    return t.skip('ps with -o lstart= is not available here');
  }
  const viaPs: ProcessHost = { ...systemHost, platform: 'darwin' };
  const saved = { TZ: process.env.TZ, LC_ALL: process.env.LC_ALL };
  const identityWith = (env: { TZ: string; LC_ALL: string }): string | undefined => {
    Object.assign(process.env, env);
    try {
      return processInfo(process.pid, viaPs)?.identity;
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  };
  const home = identityWith({ TZ: 'UTC0', LC_ALL: 'C' });
  assert.ok(home, 'an identity');
  assert.equal(identityWith({ TZ: 'JST-9', LC_ALL: 'C' }), home, 'another time zone (9 h east)');
  assert.equal(identityWith({ TZ: 'EST5EDT', LC_ALL: 'de_DE.UTF-8' }), home, 'another zone and locale');
});

test('Windows: identity (CreationDate) and command line from Win32_Process through PowerShell', () => {
  const win = host('win32', { run: () => '2025-11-26T08:01:07.1234560Z\r\n"C:\\tools\\kubectl-proxyout.exe" daemon --id a1\r\n' });
  assert.deepEqual(processInfo(4242, win), { identity: '2025-11-26T08:01:07.1234560Z', command: '"C:\\tools\\kubectl-proxyout.exe" daemon --id a1' });
  const [file, args] = win.calls[0]!;
  assert.equal(file, 'powershell.exe');
  assert.match(args.at(-1)!, /Get-CimInstance Win32_Process -Filter 'ProcessId=4242'/);
  // Windows quotes the words with spaces in them (libuv quote_cmd_arg); either way it is our daemon.
  assert.equal(isDaemonCommand('"C:\\tools\\kubectl-proxyout.exe" daemon --id a1', 'a1'), true);
  assert.equal(
    isDaemonCommand(
      '"C:\\Program Files\\nodejs\\node.exe" "C:\\Users\\John Doe\\AppData\\Roaming\\npm\\node_modules\\kubectl-proxyout\\bin\\kubectl-proxyout" daemon --id a1',
      'a1',
    ),
    true,
  );
  assert.equal(isDaemonCommand('"C:\\Users\\John Doe\\kubectl-proxyout-windows-amd64.exe" daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('"C:\\Users\\John Doe\\other.exe" daemon --id a1', 'a1'), false);
  assert.equal(isDaemonCommand('C:\\tools\\kubectl-proxyout.exe daemon --id a1', 'a1'), true);
  assert.equal(processInfo(4242, host('win32', { run: () => '\r\n' })), undefined, 'no such process');
});

test('Linux: identity from /proc/PID/stat start time and the boot id; zombies are gone', () => {
  const stat = (state: string) => `4242 (kubectl proxy) ${state} 1 ${Array.from({ length: 17 }, (_, i) => i).join(' ')} 987654 0 0`;
  const files = {
    '/proc/4242/stat': stat('S'),
    '/proc/4242/cmdline': '/usr/bin/node\0/opt/bin/kubectl-proxyout\0daemon\0--id\0a1\0',
    '/proc/sys/kernel/random/boot_id': 'boot-1\n',
  };
  assert.deepEqual(processInfo(4242, host('linux', { files })), {
    identity: 'boot-1:987654',
    command: '/usr/bin/node /opt/bin/kubectl-proxyout daemon --id a1',
  });
  assert.equal(processInfo(4242, host('linux', { files: { ...files, '/proc/4242/stat': stat('Z') } })), undefined);
});

test('the control endpoint: a unix socket in the proxy directory; on Windows a named pipe per state directory and ID', () => {
  assert.equal(layout('/s', 'linux').controlSocket('a1'), '/s/proxies/a1/control.sock');
  const pipe = layout('C:\\Users\\u\\AppData\\Roaming\\kubectl-proxyout', 'win32').controlSocket('a1');
  assert.match(pipe, /^\\\\\.\\pipe\\kubectl-proxyout-[0-9a-f]{16}-a1$/);
  assert.ok(isNamedPipe(pipe));
  assert.ok(!isNamedPipe('/s/proxies/a1/control.sock'));
  assert.equal(controlEndpoint('C:\\Users\\U\\AppData\\Roaming\\kubectl-proxyout', 'a1', 'win32'), pipe, 'Windows paths are case-insensitive');
  assert.notEqual(controlEndpoint('C:\\Users\\other\\AppData\\Roaming\\kubectl-proxyout', 'a1', 'win32'), pipe, "another user's state directory, another pipe");
  assert.doesNotThrow(() => checkSocketPath(`${pipe}${'x'.repeat(200)}`), 'no unix socket length limit for pipes');
  assert.throws(() => checkSocketPath(`/${'x'.repeat(200)}/control.sock`), /too long for a unix socket/);
});

test('macOS: a control socket too long for the proxy directory goes in the private socket directory under $TMPDIR', () => {
  // ~/Library/Application Support/kubectl-proxyout/proxies/ID/control.sock: 82 bytes and the user
  // name before the ID; macOS takes 103. A 22-letter user name failed with the default 8-hex ID.
  const root = '/Users/alexandra.konstantinou/Library/Application Support/kubectl-proxyout';
  const place = { tmp: '/var/folders/x1/abcdefghijklmnopqrstuvwxyz01/T', uid: 501 };
  for (const id of ['a1b2c3d4', 'x'.repeat(40)]) {
    const socket = layout(root, 'darwin', place).controlSocket(id);
    assert.doesNotThrow(() => checkSocketPath(socket), socket);
    assert.equal(path.dirname(socket), `${place.tmp}/kubectl-proxyout-501`);
    assert.equal(controlEndpoint(root, id, 'darwin', place), socket, 'every command finds the same one');
  }
  assert.notEqual(controlEndpoint(root, 'a1b2c3d4', 'darwin', place), controlEndpoint(root, 'a1b2c3d5', 'darwin', place), 'one per ID');
  assert.notEqual(controlEndpoint(root, 'a1b2c3d4', 'darwin', place), controlEndpoint(`${root}-2`, 'a1b2c3d4', 'darwin', place), 'one per state directory');
  // One that fits stays in the proxy directory.
  assert.equal(
    layout('/Users/al/Library/Application Support/kubectl-proxyout', 'darwin', place).controlSocket('a1b2c3d4'),
    '/Users/al/Library/Application Support/kubectl-proxyout/proxies/a1b2c3d4/control.sock',
  );
});

async function sleeper(): Promise<{ pid: number; exited: Promise<unknown> }> {
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  await once(child, 'spawn');
  return { pid: child.pid!, exited: once(child, 'exit') };
}

test('a graceful stop: on Windows a request on the control endpoint (no signal); elsewhere SIGTERM', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'proxyout-stop-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let stops = 0;
  const endpoint = path.join(dir, 'control.sock');
  const server = await startControlServer(endpoint, {
    status: () => ({
      pid: 1,
      phase: 'running',
      uptimeMs: 0,
      totals: { openStreams: 0, totalStreams: 0, failedStreams: 0, bytesFromClients: 0, bytesToClients: 0, failuresByReason: {} },
    }),
    stop: () => stops++,
  });
  t.after(() => server.close());
  const child = await sleeper();
  try {
    assert.equal(await askToStop(child.pid, endpoint, 'win32'), 'control');
    await new Promise((r) => setImmediate(r));
    assert.equal(stops, 1);
    process.kill(child.pid, 0); // still alive: no signal was sent
    assert.equal(await askToStop(child.pid, path.join(dir, 'nobody.sock'), 'win32'), 'signal', 'no answer on the pipe: terminated instead');
    await child.exited;
  } finally {
    try {
      process.kill(child.pid);
    } catch {
      /* gone */
    }
  }
  const other = await sleeper();
  assert.equal(await askToStop(other.pid, endpoint, 'linux'), 'signal');
  await other.exited;
  assert.equal(stops, 1, 'elsewhere the control endpoint is not used for this');
});

test('the daemon spawn: detached everywhere, no console window of its own on Windows', () => {
  assert.deepEqual(detachedSpawnOptions('win32'), { detached: true, windowsHide: true });
  assert.deepEqual(detachedSpawnOptions('linux'), { detached: true, windowsHide: false });
  assert.deepEqual(detachedSpawnOptions('darwin'), { detached: true, windowsHide: false });
});
