// Managed daemons against other commands at the worst moment: the real CLI and real detached
// daemons, with the simulated clusters' stalls and the state lock as the seams that hold one side
// at a known point (no sleeps deciding who wins).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startClusters, type MultiCluster } from '../helpers/multi-cluster.js';
import { eventually } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { controlRequest } from '../../src/managed/control.js';
import { layout } from '../../src/state/paths.js';
import { withStateLock } from '../../src/state/lock.js';
import { readEntry, updateEntry } from '../../src/managed/store.js';
import { isAlive } from '../../src/state/process.js';
import { TEST_RELOAD_PAUSE_ENV } from '../../src/managed/reload.js';
import { statusItem } from '../helpers/status-json.js';

let multi: MultiCluster;
let stateDir: string;
const daemons = new Set<number>();

const env = () => ({ KUBECTL_PROXYOUT_STATE_DIR: stateDir });
const cli = (args: string[], timeoutMs = 60_000) => runCli(args, { env: env(), timeoutMs });
const proxyDir = (id: string) => path.join(stateDir, 'proxies', id);
const TABLE = (withStaging: boolean) => `routes:
  - name: prod
    kind: cluster
    context: prod
${withStaging ? '  - name: staging\n    kind: cluster\n    context: staging\n' : ''}`;

async function connect(id: string, args: string[]): Promise<{ pid: number; socks: string }> {
  const r = await cli(['connect', '--kubeconfig', multi.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json', '--id', id, ...args]);
  assert.equal(r.code, 0, `connect failed: ${r.stderr}`);
  const out = JSON.parse(r.stdout) as { pid: number; socks: string };
  daemons.add(out.pid);
  return out;
}

async function routesOf(id: string): Promise<string[]> {
  const r = await cli(['status', id, '--json']);
  assert.equal(r.code, 0, r.stderr);
  return statusItem<{ routes: Array<{ name: string }> }>(r.stdout).routes.map((x) => x.name);
}

/** Binds host:port exclusively and closes again; the error code when that fails. */
async function bindCode(port: number): Promise<string | undefined> {
  const server = net.createServer();
  try {
    await once(server.listen({ host: '127.0.0.1', port, exclusive: true }), 'listening');
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code;
  } finally {
    await new Promise((r) => server.close(r));
  }
}

async function freePort(): Promise<number> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as net.AddressInfo;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * `connect --id ID` started while prod's API server answers no list or watch: resolves once the
 * daemon is in its first sync, with its listener bound; `connecting` is the connect CLI.
 */
async function connectStalled(id: string, port: number, extra: string[] = [], onSpawn?: (proc: ChildProcess) => void) {
  const prod = multi.clusters[0]!.sim;
  // Watches end at once (a watch-list then falls back to a paged LIST) and LISTs are held: the
  // first sync cannot finish, and the release answers what it holds. Watches held instead
  // (stallWatches) are never answered: a watch-list sent before the release would keep the sync
  // waiting past its 30 s deadline, whatever the release did.
  prod.endWatchesAtOnce(true);
  prod.stallLists(true);
  const connecting = runCli(
    [
      'connect',
      '--kubeconfig',
      multi.kubeconfig,
      '--context',
      'prod',
      '--listen-socks',
      `127.0.0.1:${port}`,
      '--no-proxy-auth',
      '--json',
      '--id',
      id,
      ...extra,
    ],
    { env: env(), timeoutMs: 60_000, onSpawn },
  );
  const pid = await eventually(
    async () => {
      const entry = readEntry(layout(stateDir), id);
      return entry?.phase === 'starting' && entry.pid !== undefined && (await bindCode(port)) === 'EADDRINUSE' && entry.pid;
    },
    20_000,
    100,
  );
  daemons.add(pid);
  const release = () => {
    prod.endWatchesAtOnce(false);
    prod.stallLists(false);
  };
  return { pid, connecting, release };
}

before(async () => {
  multi = await startClusters(['prod', 'staging']);
  stateDir = mkdtempSync(path.join(tmpdir(), 'proxyout-races-'));
});

after(async () => {
  await cli(['quit']).catch(() => undefined);
  for (const pid of daemons) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  rmSync(stateDir, { recursive: true, force: true });
  await multi?.close();
});

test('reload of a proxy replaced while its table was made: refused, the new proxy and its files untouched', async () => {
  const configFile = path.join(multi.dir, 'replaced.yaml');
  await writeFile(configFile, TABLE(false));
  const old = await connect('replaced', ['--config', configFile]);
  const oldCreatedAt = readEntry(layout(stateDir), 'replaced')!.createdAt;
  await writeFile(configFile, TABLE(true));
  // Reload, having looked at the entry and made its table, waits at the test hook (as long as a
  // slow disk or network home directory would keep it) until the pause file exists.
  const pause = path.join(multi.dir, 'reload-pause');
  const reloading = runCli(['reload', 'replaced'], { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir, [TEST_RELOAD_PAUSE_ENV]: pause }, timeoutMs: 60_000 });
  try {
    await eventually(async () => existsSync(`${pause}.waiting`), 20_000, 20);
    // Meanwhile the proxy is disconnected and connected again under its ID, from another file.
    assert.equal((await cli(['disconnect', 'replaced'])).code, 0);
    const other = path.join(multi.dir, 'replacement.yaml');
    await writeFile(other, TABLE(false));
    const now = await connect('replaced', ['--config', other]);
    assert.notEqual(now.pid, old.pid);
  } finally {
    await writeFile(pause, '');
  }
  const r = await reloading;
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /proxy replaced was replaced \(disconnected and connected again\) while its new routing table was made; nothing was reloaded/);
  assert.deepEqual(await routesOf('replaced'), ['prod'], 'the new proxy keeps its own table');
  assert.deepEqual(
    readdirSync(proxyDir('replaced')).filter((f) => f.startsWith('kubeconfig') || f.startsWith('table')),
    ['kubeconfig'],
    'no files of the old table in its directory',
  );

  // A request prepared for the old daemon that reaches the new one after all is refused by it.
  const answer = await controlRequest(path.join(proxyDir('replaced'), 'control.sock'), { cmd: 'reload', createdAt: oldCreatedAt }, 10_000);
  assert.equal(answer.ok, false);
  assert.match((answer as { error: string }).error, /another proxy under the ID replaced/);
  assert.equal((await cli(['disconnect', 'replaced'])).code, 0);
  assert.equal(existsSync(proxyDir('replaced')), false);
});

test('two reloads at once: the one that began later applies last, so the proxy serves the file as it is now', async () => {
  const configFile = path.join(multi.dir, 'reloaded-twice.yaml');
  await writeFile(configFile, TABLE(false));
  await connect('twice', ['--config', configFile]);
  // The first reload made its table from the file as it was, and stands (a slow disk) until the
  // pause file exists; meanwhile the file gains staging and a second reload runs.
  const pause = path.join(multi.dir, 'twice-pause');
  const first = runCli(['reload', 'twice'], { env: { KUBECTL_PROXYOUT_STATE_DIR: stateDir, [TEST_RELOAD_PAUSE_ENV]: pause }, timeoutMs: 60_000 });
  let second: ReturnType<typeof cli>;
  try {
    await eventually(async () => existsSync(`${pause}.waiting`), 20_000, 20);
    await writeFile(configFile, TABLE(true));
    // The second one runs to its end, or says it waits for the first, before the first goes on.
    let said = false;
    second = runCli(['reload', 'twice'], {
      env: env(),
      timeoutMs: 60_000,
      onStderr: (text) => (said ||= /another reload of this proxy is under way/.test(text)),
    });
    let done = false;
    void second.then(() => (done = true));
    await eventually(async () => said || done, 30_000, 50);
  } finally {
    await writeFile(pause, '');
  }
  const [a, b] = await Promise.all([first, second!]);
  assert.equal(a.code, 0, a.stderr);
  assert.equal(b.code, 0, b.stderr);
  assert.match(b.stdout, /twice reloaded: 2 routes/);
  assert.deepEqual(await routesOf('twice'), ['prod', 'staging'], 'the table of the file as it is now');
  assert.ok(existsSync(path.join(proxyDir('twice'), 'kubeconfig.staging')), "staging's credentials stay while it serves");
  assert.equal((await cli(['disconnect', 'twice'])).code, 0);
});

test('a connect suspended (Ctrl-Z) while its proxy was disconnected and connected again: on fg it says so, and leaves the new one alone', async () => {
  const id = 'suspended';
  let first: ChildProcess | undefined;
  const { pid, connecting, release } = await connectStalled(id, await freePort(), [], (proc) => (first = proc));
  try {
    first!.kill('SIGSTOP');
    assert.equal((await cli(['disconnect', id])).code, 0);
    release();
    // Meanwhile another terminal connects the ID again.
    const other = await connect(id, ['--context', 'staging']);
    assert.notEqual(other.pid, pid);
    first!.kill('SIGCONT'); // fg
    const c = await connecting;
    assert.equal(c.code, 1, `it did not connect another's proxy: ${c.stderr}`);
    assert.match(c.stderr, /proxy suspended was stopped while it started/);
    assert.equal(isAlive(other.pid), true, "the other connect's daemon runs on");
    const s = statusItem<{ state: string; pid: number; context: string }>((await cli(['status', id, '--json'])).stdout);
    assert.deepEqual([s.state, s.pid, s.context], ['running', other.pid, 'staging']);
  } finally {
    first?.kill('SIGCONT');
    release();
  }
  assert.equal((await cli(['disconnect', id])).code, 0);
});

test('a daemon stopped during its start frees its ports at once, before it can record anything', async () => {
  const port = await freePort();
  // A long grace: the daemon's own deadlines are far off; only the stop itself may free the port.
  const { pid, connecting, release } = await connectStalled('early-ports', port, ['--shutdown-grace', '30s']);
  try {
    // Another command holds the state lock, so the daemon cannot record "stopping" or remove its
    // entry. It is told to stop as disconnect tells it (SIGTERM) and must close its listener
    // anyway: a `connect` waiting for the entry to go binds the same port next.
    await withStateLock(layout(stateDir), async () => {
      process.kill(pid, 'SIGTERM');
      await eventually(async () => (await bindCode(port)) === undefined, 10_000, 100);
      assert.equal(isAlive(pid), true, 'freed while the daemon still waits for the lock');
    });
    await eventually(async () => !isAlive(pid), 10_000, 50);
    const c = await connecting;
    assert.notEqual(c.code, 0);
    assert.match(c.stderr, /stopped while it started/);
    assert.equal(existsSync(proxyDir('early-ports')), false, 'its entry is gone');
  } finally {
    release();
  }
});

test('a daemon that finishes starting after disconnect recorded "stopping" keeps it (a connect meanwhile waits, not "already running")', async () => {
  const id = 'late-ready';
  const { pid, connecting, release } = await connectStalled(id, await freePort());
  const l = layout(stateDir);
  try {
    await withStateLock(l, async () => {
      // The first sync ends; the daemon then waits for the lock to record itself ready.
      release();
      const log = path.join(stateDir, 'logs', `${id}.log`);
      await eventually(async () => readFileSync(log, 'utf8').includes('"proxy ready"'), 20_000, 100);
      // What disconnect does under the lock before its SIGTERM; the signal is held back here, so
      // the record below is what a daemon that has not yet handled it writes.
      updateEntry(l, id, (e) => (e.phase = 'stopping'));
    });
    const recorded = await eventually(
      async () => {
        const e = readEntry(l, id);
        return e?.startedAt !== undefined && e;
      },
      10_000,
      50,
    );
    assert.equal(recorded.phase, 'stopping');
    assert.equal(recorded.pid, pid);
    const s = await cli(['status', id, '--json']);
    assert.equal(statusItem<{ state: string }>(s.stdout).state, 'stopping');
    const c = await connecting;
    assert.match(c.stderr, /stopped while it started/);
  } finally {
    release();
    process.kill(pid, 'SIGTERM');
  }
  await eventually(async () => !isAlive(pid), 10_000, 50);
  assert.equal(existsSync(proxyDir(id)), false);
});

test('a stop while the daemon waits for the lock to record itself running is acted on at once: it drains and frees its port without the lock', async () => {
  const id = 'stop-while-recording';
  const port = await freePort();
  const { pid, connecting, release } = await connectStalled(id, port);
  const l = layout(stateDir);
  const log = path.join(stateDir, 'logs', `${id}.log`);
  try {
    await withStateLock(l, async () => {
      // The first sync ends; the daemon then waits for the lock, which we hold, to record itself.
      release();
      await eventually(async () => readFileSync(log, 'utf8').includes('"proxy ready"'), 20_000, 100);
      process.kill(pid, 'SIGTERM');
      // It stops now, not once the lock is free: its drain starts and its listener closes.
      await eventually(async () => readFileSync(log, 'utf8').includes('"daemon stopping"'), 10_000, 50);
      await eventually(async () => (await bindCode(port)) === undefined, 10_000, 100);
      assert.equal(isAlive(pid), true, 'stopping while the lock is still held elsewhere');
    });
  } finally {
    release();
  }
  await eventually(async () => !isAlive(pid), 10_000, 50);
  const c = await connecting;
  assert.notEqual(c.code, 0, c.stdout);
  assert.equal(existsSync(proxyDir(id)), false, 'its entry is gone');
});

test('disconnect during a reload still checking its routes: the daemon answers the reload and exits by itself, not killed', async () => {
  const configFile = path.join(multi.dir, 'reloading.yaml');
  await writeFile(configFile, TABLE(false));
  const c = await connect('reloading', ['--config', configFile]);
  // The reload adds staging, whose API server answers no list or watch: its sync would take 30 s.
  await writeFile(configFile, TABLE(true));
  const staging = multi.clusters[1]!.sim;
  staging.resetCounters();
  staging.stallWatches(true);
  staging.stallLists(true);
  try {
    const reloading = cli(['reload', 'reloading']);
    await eventually(async () => staging.counters.watch + staging.counters.list > 0, 20_000, 100);
    const d = await cli(['disconnect', 'reloading']);
    assert.equal(d.code, 0, d.stderr);
    assert.doesNotMatch(d.stdout, /killed/);
    const r = await reloading;
    assert.equal(r.code, 1);
    assert.match(r.stderr, /proxy reloading kept its routing table: the proxy is stopping/);
    assert.equal(isAlive(c.pid), false);
    assert.equal(existsSync(proxyDir('reloading')), false);
  } finally {
    staging.stallWatches(false);
    staging.stallLists(false);
  }
});

/** A TCP connection to the proxy at host:port that sends nothing and stays open (a drain waits for it). */
async function heldConnection(address: string): Promise<net.Socket> {
  const at = address.lastIndexOf(':');
  const client = net.connect(Number(address.slice(at + 1)), address.slice(0, at));
  client.on('error', () => undefined);
  await once(client, 'connect');
  return client;
}

test('another command holding the state lock while a daemon stops: it gives the lock up in time and exits, not killed', async () => {
  const c = await connect('lock-held', ['--context', 'prod']);
  // A client that keeps its connection: the drain takes the whole grace (4 s), so the daemon
  // reaches its last state change while the lock below is held.
  const client = await heldConnection(c.socks);
  const l = layout(stateDir);
  try {
    const disconnecting = cli(['disconnect', 'lock-held']);
    await eventually(async () => readEntry(l, 'lock-held')?.phase === 'stopping', 20_000, 5);
    // Held past the moment disconnect would SIGKILL (5 s after its SIGTERM).
    await withStateLock(l, () => new Promise((r) => setTimeout(r, 6_500)));
    const d = await disconnecting;
    assert.equal(d.code, 0, d.stderr);
    assert.doesNotMatch(d.stdout, /killed/);
    assert.equal(existsSync(proxyDir('lock-held')), false, 'disconnect removed the entry the daemon could not');
    assert.match(readFileSync(path.join(stateDir, 'logs', 'lock-held.log'), 'utf8'), /could not remove the entry under the state lock in time/);
  } finally {
    client.destroy();
  }
});

test('a second disconnect while the first waits for the drain: the open connections still get their grace', async () => {
  const c = await connect('stopped-twice', ['--context', 'prod']);
  const client = await heldConnection(c.socks);
  const closed = once(client, 'close');
  const l = layout(stateDir);
  try {
    const began = Date.now();
    const first = cli(['disconnect', 'stopped-twice']);
    await eventually(async () => readEntry(l, 'stopped-twice')?.phase === 'stopping', 20_000, 5);
    const second = await cli(['disconnect', 'stopped-twice']);
    const firstDone = await first;
    assert.equal(firstDone.code, 0, firstDone.stderr);
    assert.equal(second.code, 0, second.stderr);
    await closed;
    // The drain lasts the grace (4 s) for a client that keeps its connection; a second SIGTERM
    // would have ended it at once.
    assert.ok(Date.now() - began >= 3_000, `the connection was cut after ${Date.now() - began} ms`);
    assert.doesNotMatch(readFileSync(path.join(stateDir, 'logs', 'stopped-twice.log'), 'utf8'), /second signal/);
    assert.equal(isAlive(c.pid), false);
  } finally {
    client.destroy();
  }
});
