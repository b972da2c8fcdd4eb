// Managed daemons in unusual surroundings: a state directory that stops taking writes (a full
// disk, a file system remounted read-only: what was started can still be seen and stopped; on a
// tmpfs), a working directory removed under the shell. The real CLI and real daemons against the
// simulated cluster.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { runCli } from '../helpers/proxy-process.js';
import { isAlive } from '../../src/state/process.js';
import { layout } from '../../src/state/paths.js';
import { readEntry } from '../../src/managed/store.js';

let cluster: TestCluster;
let mountPoint: string | undefined;
const daemons = new Set<number>();

before(async () => {
  cluster = await startTestCluster();
});

after(async () => {
  for (const pid of daemons) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* already gone */
    }
  }
  if (mountPoint) {
    execFileSync('umount', ['-l', mountPoint]);
    rmSync(mountPoint, { recursive: true, force: true });
  }
  await cluster?.close();
});

/** A 64 KiB tmpfs, or undefined where one cannot be mounted. */
function smallTmpfs(): string | undefined {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return undefined;
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', dir]);
  } catch {
    rmSync(dir, { recursive: true, force: true });
    return undefined;
  }
  return (mountPoint = dir);
}

function fill(dir: string): void {
  try {
    execFileSync('dd', ['if=/dev/zero', `of=${path.join(dir, 'filler')}`, 'bs=1k'], { stdio: 'ignore' });
  } catch {
    // ENOSPC: full, as wanted
  }
}

test('disconnect and quit stop a daemon whose state directory has filled up', async (t) => {
  const full = smallTmpfs();
  if (!full) return t.skip('needs root on Linux to mount a small tmpfs');
  const env = { KUBECTL_PROXYOUT_STATE_DIR: path.join(full, 'state') };
  const connect = async (id: string) => {
    const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json', '--id', id], { env });
    assert.equal(r.code, 0, r.stderr);
    const { pid } = JSON.parse(r.stdout) as { pid: number };
    daemons.add(pid);
    return pid;
  };
  const one = await connect('one');
  const two = await connect('two');
  fill(full);

  // A reload cannot write its table: one line naming where, and the proxy runs on as it was.
  const r = await runCli(['reload', 'two'], { env });
  assert.equal(r.code, 1, r.stdout);
  assert.match(r.stderr, /^Error: cannot write the new routing table in \S+\/proxies\/two: ENOSPC[^\n]*; nothing was reloaded\n$/);
  const s = await runCli(['status', 'two'], { env });
  assert.match(s.stdout, /^two +running /m);

  const d = await runCli(['disconnect', 'one'], { env });
  assert.equal(d.code, 0, d.stderr);
  assert.equal(isAlive(one), false, 'disconnect waited for the daemon to go');
  const q = await runCli(['quit'], { env });
  assert.equal(q.code, 0, q.stderr);
  await eventually(async () => !isAlive(two), 2_000, 50);
  assert.deepEqual(readdirSync(path.join(env.KUBECTL_PROXYOUT_STATE_DIR, 'proxies')), [], 'their entries are gone');
});

test('connect says why a daemon stopped that could not record itself as running (a full disk): its logged error', async (t) => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return t.skip('needs root on Linux to mount a small tmpfs');
  // Only the proxies' directory fills: the log, elsewhere, takes the daemon's reason.
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-full-proxies-'));
  const state = path.join(dir, 'state');
  const proxies = path.join(state, 'proxies');
  mkdirSync(proxies, { recursive: true, mode: 0o700 });
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k,mode=0700', 'tmpfs', proxies]);
  try {
    // Watches end at once and LISTs are held: the daemon's first sync cannot finish until released.
    cluster.sim.endWatchesAtOnce(true);
    cluster.sim.stallLists(true);
    const env = { KUBECTL_PROXYOUT_STATE_DIR: state };
    const running = runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--id', 'nospace'], { env });
    // The daemon syncs, its entry "starting": then the disk fills, and the sync may finish.
    const pid = await eventually(async () => {
      const entry = readEntry(layout(state), 'nospace');
      return entry?.phase === 'starting' && entry.pid !== undefined && entry.pid;
    }, 20_000);
    daemons.add(pid);
    fill(path.join(proxies, 'nospace'));
    cluster.sim.endWatchesAtOnce(false);
    cluster.sim.stallLists(false);
    const r = await running;
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /proxy nospace stopped while it started: could not record the daemon as running; stopping \(.*ENOSPC/);
  } finally {
    cluster.sim.endWatchesAtOnce(false);
    cluster.sim.stallLists(false);
    execFileSync('umount', ['-l', proxies]);
    rmSync(dir, { recursive: true, force: true });
  }
});

test('connect from a working directory that was removed starts the daemon, as kubectl and the foreground proxy run there', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-cwd-'));
  try {
    const env = { KUBECTL_PROXYOUT_STATE_DIR: path.join(dir, 'state') };
    const gone = path.join(dir, 'gone');
    mkdirSync(gone);
    // spawn() returns once the CLI runs there: it is removed from under it, as `rm -rf` in another shell.
    const running = runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json', '--id', 'cwd'], {
      env,
      cwd: gone,
    });
    rmSync(gone, { recursive: true });
    const r = await running;
    assert.equal(r.code, 0, r.stderr);
    const { pid } = JSON.parse(r.stdout) as { pid: number };
    daemons.add(pid);
    const d = await runCli(['disconnect', 'cwd'], { env });
    assert.equal(d.code, 0, d.stderr);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test(
  'connect under a read-only home (a container, a CI job) says the file system is read-only, not that the directory does not exist',
  { skip: (process.platform !== 'linux' || process.getuid?.() !== 0) && 'needs root on Linux (a read-only bind mount)' },
  async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'proxyout-ro-home-'));
    try {
      // The CLI runs in a mount namespace of its own, where `home` is read-only.
      const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--id', 'ro'], {
        env: { HOME: home, KUBECTL_PROXYOUT_STATE_DIR: undefined, XDG_STATE_HOME: undefined },
        via: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind -o ro "$0" "$0" && exec "$@"', home],
      });
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /^Error: cannot create the state directory .*\/\.local\/state\/kubectl-proxyout: EROFS: read-only file system, mkdir '.*\/\.local'; set KUBECTL_PROXYOUT_STATE_DIR to a directory you can write$/m,
      );
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  },
);

test(
  'doctor under a read-only home warns that the state directory cannot be created, not that it will be',
  { skip: (process.platform !== 'linux' || process.getuid?.() !== 0) && 'needs root on Linux (a read-only bind mount)' },
  async () => {
    const home = mkdtempSync(path.join(tmpdir(), 'proxyout-ro-doctor-'));
    try {
      const r = await runCli(['doctor', '--kubeconfig', cluster.kubeconfig], {
        env: { HOME: home, KUBECTL_PROXYOUT_STATE_DIR: undefined, XDG_STATE_HOME: undefined },
        via: ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', 'mount --bind -o ro "$0" "$0" && exec "$@"', home],
        timeoutMs: 60_000,
      });
      assert.match(
        r.stdout,
        /WARN state-dir: .*\/\.local\/state\/kubectl-proxyout does not exist and cannot be created: .* is on a read-only file system\n/,
        r.stdout,
      );
      assert.match(r.stdout, /fix: set KUBECTL_PROXYOUT_STATE_DIR to a directory you can write/);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  },
);

test('status and disconnect see and stop a daemon whose state directory was remounted read-only', async (t) => {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return t.skip('needs root on Linux to mount');
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-ro-'));
  const state = path.join(dir, 'state');
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m,mode=0700', 'tmpfs', dir]);
  const mounts = [dir];
  t.after(() => {
    for (const m of mounts.reverse()) execFileSync('umount', ['-l', m]);
    rmSync(dir, { recursive: true, force: true });
  });
  const env = { KUBECTL_PROXYOUT_STATE_DIR: state };
  const r = await runCli(['connect', '--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--no-proxy-auth', '--json', '--id', 'ro'], { env });
  assert.equal(r.code, 0, r.stderr);
  const { pid } = JSON.parse(r.stdout) as { pid: number };
  daemons.add(pid);
  // As ext4's errors=remount-ro does: the files the daemon has open stay open, nothing new is written.
  execFileSync('mount', ['--bind', state, state]);
  mounts.push(state);
  execFileSync('mount', ['-o', 'remount,bind,ro', state]);

  const status = await runCli(['status'], { env });
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, new RegExp(`^ro +running .* ${pid} `, 'm'));
  const d = await runCli(['disconnect', 'ro'], { env });
  assert.equal(d.code, 0, d.stderr);
  assert.match(d.stdout, /disconnected ro /);
  assert.equal(isAlive(pid), false, 'disconnect waited for the daemon to go');
  const after = await runCli(['status'], { env });
  assert.equal(after.code, 0, after.stderr);
  assert.match(after.stdout, /^ro +dead /m, 'its record cannot be removed: said dead');
});
