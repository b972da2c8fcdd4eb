// Pid verification, the control socket, reaping dead entries, and the log reader/formatter,
// with real processes, sockets and files.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { appendFileSync, existsSync, mkdtempSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isAlive, isDaemonCommand, isOurDaemon, processIdentity, processInfo } from '../../src/state/process.js';
import { controlRequest, queryStatus, startControlServer } from '../../src/managed/control.js';
import { ensureStateDir, layout } from '../../src/state/paths.js';
import { readEntry, writeEntry, type ProxyEntry } from '../../src/managed/store.js';
import { inspect, inspectAll } from '../../src/managed/registry.js';
import { stopProxy } from '../../src/managed/stop.js';
import { termWaitMs } from '../../src/managed/stop-budget.js';
import { withStateLock } from '../../src/state/lock.js';
import { formatLogLine, LogReader } from '../../src/managed/logs.js';
import { cacheSummary } from '../../src/managed/status.js';
import { formatBytes, formatUptime, statusTable } from '../../src/cli/status-table.js';
import { proxyEntry } from '../helpers/proxy-entry.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-proc-unit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A process whose command line looks like our daemon: `node …/kubectl-proxyout daemon --id ID`. */
async function fakeDaemon(t: { after(fn: () => void): void }, id: string, body = ''): Promise<ChildProcess> {
  const dir = tempDir(t);
  const script = path.join(dir, 'kubectl-proxyout');
  writeFileSync(script, `${body}\nsetInterval(() => {}, 1000);\nprocess.stdout.write('up');\n`);
  const child = spawn(process.execPath, [script, 'daemon', '--id', id], { stdio: ['ignore', 'pipe', 'ignore'] });
  t.after(() => child.kill('SIGKILL'));
  await once(child.stdout!, 'data');
  return child;
}

const entry = (id: string, extra: Partial<ProxyEntry> = {}): ProxyEntry => proxyEntry(id, { phase: 'running', ...extra });

test('disconnect records "stopping" before its SIGTERM: a connect meanwhile waits for the daemon to go, not "already running"', async (t) => {
  const l = layout(tempDir(t));
  ensureStateDir(l);
  // A daemon slow to write its own "stopping" (here: never) and to exit.
  const child = await fakeDaemon(t, 'slow-stop', "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 500));");
  writeEntry(l, entry('slow-stop', { pid: child.pid, procIdentity: processIdentity(child.pid!) }));
  const stopping = stopProxy(l, 'slow-stop');
  const exited = once(child, 'exit');
  while (readEntry(l, 'slow-stop')?.phase !== 'stopping') {
    assert.equal(child.exitCode, null, 'still running when "stopping" is recorded');
    await new Promise((r) => setTimeout(r, 10));
  }
  assert.equal(inspect(l, 'slow-stop')?.state, 'stopping');
  assert.equal(isAlive(child.pid!), true);
  assert.equal((await stopping).outcome, 'stopped');
  await exited;
  assert.equal(readEntry(l, 'slow-stop'), undefined, 'the entry goes with it');
});

test('a daemon that ignores SIGTERM is killed, but never while the state lock is held (as a daemon removing its entry holds it)', async (t) => {
  const l = layout(tempDir(t));
  ensureStateDir(l);
  const child = await fakeDaemon(t, 'deaf', "process.on('SIGTERM', () => {});");
  const deaf = entry('deaf', { pid: child.pid, procIdentity: processIdentity(child.pid!) });
  writeEntry(l, deaf);
  const exited = once(child, 'exit');
  const stopping = stopProxy(l, 'deaf');
  while (readEntry(l, 'deaf')?.phase !== 'stopping') await new Promise((r) => setTimeout(r, 10));
  // Held past the moment disconnect gives up waiting and kills.
  await withStateLock(l, async () => {
    await new Promise((r) => setTimeout(r, termWaitMs(deaf.options.shutdownGraceMs) + 1_500));
    assert.equal(isAlive(child.pid!), true, 'not killed while the lock is held');
  });
  assert.equal((await stopping).outcome, 'killed');
  assert.deepEqual(await exited, [null, 'SIGKILL']);
  assert.equal(readEntry(l, 'deaf'), undefined, 'the entry goes with it');
});

test('isAlive: this process yes, an exited one no, nonsense pids no', async () => {
  assert.equal(isAlive(process.pid), true);
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  const pid = child.pid!;
  await once(child, 'exit');
  assert.equal(isAlive(pid), false);
  for (const bad of [0, -1, 1.5, Number.NaN]) assert.equal(isAlive(bad), false);
});

test('process identity is stable for a process and differs between processes', async (t) => {
  const a = processIdentity(process.pid);
  assert.ok(a);
  assert.equal(processIdentity(process.pid), a);
  const child = await fakeDaemon(t, 'x1');
  assert.notEqual(processIdentity(child.pid!), a);
  assert.match(processInfo(child.pid!)!.command, /kubectl-proxyout daemon --id x1$/);
});

test('isOurDaemon: right command line, id and identity, or nothing is signalled', async (t) => {
  const child = await fakeDaemon(t, 'abc');
  const pid = child.pid!;
  const identity = processIdentity(pid)!;
  assert.equal(isOurDaemon(pid, identity, 'abc'), true);
  assert.equal(isOurDaemon(pid, identity, 'abcd'), false, 'another ID');
  assert.equal(isOurDaemon(pid, `${identity}0`, 'abc'), false, 'same pid, other start: a reused pid');
  assert.equal(isOurDaemon(process.pid, processIdentity(process.pid), 'abc'), false, 'not a daemon command line');
  child.kill('SIGKILL');
  await once(child, 'exit');
  assert.equal(isOurDaemon(pid, identity, 'abc'), false, 'gone');
});

test('isDaemonCommand parses the command line strictly', () => {
  assert.equal(isDaemonCommand('/usr/bin/node /opt/p/bin/kubectl-proxyout daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('/usr/bin/node /opt/p/bin/kubectl-proxyout daemon --id=a1', 'a1'), true);
  assert.equal(isDaemonCommand('/usr/bin/node /opt/p/bin/kubectl-proxyout daemon --id a12', 'a1'), false);
  assert.equal(isDaemonCommand('/usr/bin/node /opt/p/bin/kubectl-proxyout status a1', 'a1'), false);
  assert.equal(isDaemonCommand('/usr/bin/node other.js daemon --id a1', 'a1'), false);
  assert.equal(isDaemonCommand('sleep 100', 'a1'), false);
});

test('isDaemonCommand knows the single executable and the bundle, and nothing merely named like them', () => {
  assert.equal(isDaemonCommand('/home/u/.krew/store/proxyout/v0.1.0/kubectl-proxyout-linux-amd64 daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('/usr/local/bin/kubectl-proxyout daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('C:\\Users\\u\\kubectl-proxyout.exe daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('/usr/bin/node /x/dist/pkg/kubectl-proxyout.cjs daemon --id a1', 'a1'), true);
  assert.equal(isDaemonCommand('/usr/bin/not-kubectl-proxyout daemon --id a1', 'a1'), false);
  assert.equal(isDaemonCommand('/usr/bin/kubectl-proxyout-evil.sh daemon --id a1', 'a1'), false);
});

test('isDaemonCommand takes the program name connect recorded: a renamed single executable', () => {
  assert.equal(isDaemonCommand('/usr/local/bin/kubectl-pxy daemon --id a1', 'a1'), false, 'not recorded: not ours');
  assert.equal(isDaemonCommand('/usr/local/bin/kubectl-pxy daemon --id a1', 'a1', 'kubectl-pxy'), true);
  assert.equal(isDaemonCommand('"C:\\Users\\J Doe\\kpx.exe" daemon --id a1', 'a1', 'kpx.exe'), true);
  assert.equal(isDaemonCommand('/usr/local/bin/not-kubectl-pxy daemon --id a1', 'a1', 'kubectl-pxy'), false, 'only that name');
  assert.equal(isDaemonCommand('/usr/local/bin/kubectl-pxy daemon --id a2', 'a1', 'kubectl-pxy'), false, 'and that ID');
});

test('control socket: status and stop over newline-delimited JSON, mode 0600', async (t) => {
  const dir = tempDir(t);
  const sock = path.join(dir, 'control.sock');
  let stops = 0;
  const totals = { openStreams: 1, totalStreams: 5, failedStreams: 1, bytesFromClients: 10, bytesToClients: 20, failuresByReason: { timeout: 1 } };
  const server = await startControlServer(sock, {
    status: () => ({ pid: process.pid, phase: 'running', uptimeMs: 1234, totals }),
    stop: () => stops++,
  });
  t.after(() => server.close());
  assert.equal(statSync(sock).mode & 0o777, 0o600);
  const live = await queryStatus(sock);
  assert.deepEqual(live, { pid: process.pid, phase: 'running', uptimeMs: 1234, totals });
  assert.deepEqual(await controlRequest(sock, { cmd: 'stop' }), { ok: true });
  await new Promise((r) => setImmediate(r));
  assert.equal(stops, 1);
  assert.deepEqual(await controlRequest(sock, { cmd: 'nope' } as never), { ok: false, error: 'unknown command "nope"' });
  assert.equal(await queryStatus(path.join(dir, 'missing.sock')), undefined, 'no daemon: undefined, not a throw');
});

test('a control server replaces a stale socket file', async (t) => {
  const sock = path.join(tempDir(t), 'control.sock');
  writeFileSync(sock, 'left over');
  const server = await startControlServer(sock, { status: () => ({ pid: 1, phase: 'running', uptimeMs: 0, totals: {} as never }), stop: () => undefined });
  t.after(() => server.close());
  assert.equal((await queryStatus(sock))?.pid, 1);
});

test('reaping: a dead daemon becomes a tombstone without credentials; a live one is left alone', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  const exited = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await once(exited, 'exit');
  writeEntry(l, entry('dead1', { pid: exited.pid, procIdentity: 'whatever' }));
  writeFileSync(l.kubeconfigFile('dead1'), 'secret');
  writeFileSync(l.controlSocket('dead1'), '');
  writeEntry(l, entry('orphan', { phase: 'starting' })); // connect died before spawning

  const live = await fakeDaemon(t, 'live1');
  writeEntry(l, entry('live1', { pid: live.pid, procIdentity: processIdentity(live.pid!) }));
  writeFileSync(l.kubeconfigFile('live1'), 'secret');

  const found = Object.fromEntries(inspectAll(l).map((x) => [x.entry.id, x]));
  assert.equal(found.dead1?.state, 'dead');
  assert.match(found.dead1!.entry.error!, /the daemon \(pid \d+\) is gone/);
  assert.equal(readEntry(l, 'dead1')?.phase, 'dead');
  assert.ok(!existsSync(l.kubeconfigFile('dead1')), 'credentials removed at once');
  assert.ok(!existsSync(l.controlSocket('dead1')));
  assert.equal(found.orphan?.state, 'dead');
  assert.equal(found.live1?.state, 'running');
  assert.ok(existsSync(l.kubeconfigFile('live1')));
  assert.equal(inspect(l, 'none'), undefined);
});

test('log lines: readable form with time, level, message and fields; non-JSON unchanged', () => {
  const line = JSON.stringify({
    level: 30,
    time: Date.UTC(2025, 0, 2, 3, 4, 5, 6),
    pid: 1,
    id: 'a1',
    stream: 3,
    target: 'web.shop:8080',
    via: 'shop/web-1',
    durationMs: 12,
    msg: 'stream closed',
  });
  const text = formatLogLine(line);
  assert.match(text, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} INFO {2}stream closed stream=3 target=web\.shop:8080 via=shop\/web-1 durationMs=12$/);
  assert.match(
    formatLogLine(JSON.stringify({ level: 40, time: 0, msg: 'stream failed: x', reason: 'no ready endpoint', obj: { a: 1 } })),
    /WARN {2}stream failed: x reason="no ready endpoint" obj=\{"a":1\}$/,
  );
  assert.equal(formatLogLine('Error: something on stderr'), 'Error: something on stderr');
  assert.equal(formatLogLine('[1,2]'), '[1,2]');
});

test('LogReader: complete lines only, then appended ones, truncation and rotation', (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'a.log');
  writeFileSync(file, 'one\ntwo\nthr');
  const reader = new LogReader(file);
  t.after(() => reader.close());
  assert.deepEqual(reader.readLines(), ['one', 'two']);
  appendFileSync(file, 'ee\nfour\n');
  assert.deepEqual(reader.readLines(), ['three', 'four']);
  assert.deepEqual(reader.readLines(), []);
  truncateSync(file, 0);
  appendFileSync(file, 'after truncate\n');
  assert.deepEqual(reader.readLines(), ['after truncate']);
  appendFileSync(file, 'last of old\n');
  renameSync(file, `${file}.1`);
  writeFileSync(file, 'new file\n');
  assert.deepEqual(reader.readLines(), ['last of old'], 'the rotated file is finished first');
  assert.deepEqual(reader.readLines(), ['new file']);
  appendFileSync(file, 'no newline');
  assert.deepEqual(reader.readLines(), []);
  assert.deepEqual(reader.rest(), ['no newline']);
});

test('status formatting: bytes, uptime, cache summary, table with dead rows explained', () => {
  assert.equal(formatBytes(0), '0B');
  assert.equal(formatBytes(1536), '1.5KiB');
  assert.equal(formatBytes(20 * 1024 * 1024), '20MiB');
  assert.equal(formatUptime(45), '45s');
  assert.equal(formatUptime(723), '12m3s');
  assert.equal(formatUptime(5 * 3600 + 120), '5h2m');
  assert.equal(formatUptime(3 * 86400 + 4 * 3600), '3d4h');
  assert.deepEqual(cacheSummary({ scope: 'cluster', namespaces: [], watches: { a: 'synced', b: 'synced' } }), {
    state: 'synced',
    scope: 'cluster',
    namespaces: [],
  });
  assert.equal(cacheSummary({ scope: 'cluster', namespaces: [], watches: { a: 'synced', b: 'retrying' } })?.state, 'retrying');
  assert.equal(cacheSummary({ scope: 'namespaces', namespaces: ['x'], watches: { a: 'starting' } })?.state, 'syncing');
  assert.deepEqual(statusTable([]), ['no managed proxies (start one with: kubectl proxyout connect)']);
  const base = { context: 'sim', namespace: 'shop', server: 's', version: '1.0.0', createdAt: '', startedAt: null, failuresByReason: {}, logFile: '/l' };
  const lines = statusTable([
    {
      ...base,
      id: 'a1',
      state: 'running',
      pid: 10,
      socks: '127.0.0.1:1080',
      http: null,
      uptimeSeconds: 65,
      openStreams: 1,
      totalStreams: 9,
      failedStreams: 0,
      bytesFromClients: 100,
      bytesToClients: 2048,
      cache: { state: 'synced' },
    },
    {
      ...base,
      id: 'b2',
      state: 'dead',
      pid: 11,
      socks: null,
      http: null,
      uptimeSeconds: null,
      openStreams: null,
      totalStreams: null,
      failedStreams: null,
      bytesFromClients: null,
      bytesToClients: null,
      cache: null,
      error: 'the daemon (pid 11) is gone',
    },
    {
      ...base,
      id: 'c3',
      state: 'stopping',
      pid: 12,
      socks: '127.0.0.1:1081',
      http: null,
      uptimeSeconds: 30,
      openStreams: null,
      totalStreams: null,
      failedStreams: null,
      bytesFromClients: null,
      bytesToClients: null,
      cache: null,
    },
  ]);
  assert.match(lines[0]!, /^ID +STATE +CONTEXT +NAMESPACE +PID +UPTIME +LISTEN +OPEN +TOTAL +UP +DOWN +CACHE$/);
  assert.match(lines[1]!, /^a1 +running +sim +shop +10 +1m5s +socks5h:\/\/127\.0\.0\.1:1080 +1 +9 +100B +2\.0KiB +synced$/);
  assert.match(lines[2]!, /^b2 +dead +sim +shop +11 +- +- +- +- +- +- +-$/);
  assert.match(lines[3]!, /^c3 +stopping +sim +shop +12 +30s /);
  assert.equal(lines[4], 'b2: dead (the daemon (pid 11) is gone); clean up with: kubectl proxyout disconnect b2');
  // Left stopping (its stopper interrupted, the daemon hung): the way to see the stop through.
  assert.equal(lines[5], 'c3: stopping (open streams get its drain time to finish); if it stays stopping, end it with: kubectl proxyout disconnect c3');
});
