// What state.test.ts leaves out of the state directory's safety checks: other owners (directly
// or through a symlink), unsafe subdirectories, and the modes of what a command or daemon writes
// under a permissive umask. Changing owners needs root; those cases skip otherwise.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, chownSync, existsSync, lchownSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ensureStateDir, layout, stateDirExists } from '../../src/state/paths.js';
import { writeEntry } from '../../src/managed/store.js';
import { writePrivateFile } from '../../src/state/private-file.js';
import { writeProxyAuthFile } from '../../src/state/proxy-auth.js';
import { runCli } from '../helpers/proxy-process.js';

const NOBODY = 65534;
const isRoot = process.getuid?.() === 0;

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-sec-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const mode = (p: string) => statSync(p).mode & 0o777;

test('a state directory owned by another user is refused', { skip: !isRoot && 'needs root to chown' }, (t) => {
  const root = path.join(tempDir(t), 'state');
  mkdirSync(root, { mode: 0o700 });
  chownSync(root, NOBODY, NOBODY);
  assert.throws(() => ensureStateDir(layout(root)), /owned by uid 65534, not by you/);
  assert.throws(() => stateDirExists(layout(root)), /owned by uid 65534/);
});

test('a state directory reached through someone else’s symlink is refused', { skip: !isRoot && 'needs root to lchown' }, (t) => {
  const base = tempDir(t);
  const real = path.join(base, 'real');
  mkdirSync(real, { mode: 0o700 });
  const link = path.join(base, 'link');
  symlinkSync(real, link);
  assert.doesNotThrow(() => ensureStateDir(layout(link)), 'our own symlink to our own directory is fine');
  lchownSync(link, NOBODY, NOBODY);
  assert.throws(() => ensureStateDir(layout(link)), /symlink owned by uid 65534/);
});

test('an unsafe proxies/ or logs/ subdirectory is refused too', (t) => {
  const l = ensureStateDir(layout(path.join(tempDir(t), 'state')));
  for (const dir of [l.proxiesDir, l.logsDir]) {
    chmodSync(dir, 0o757);
    assert.throws(() => ensureStateDir(l), /writable by group or others \(mode 757\)/, dir);
    chmodSync(dir, 0o700);
  }
  assert.doesNotThrow(() => ensureStateDir(l));
});

test('under umask 000, entries, credentials and private files are still 0600 in 0700 directories', (t) => {
  const old = process.umask(0);
  try {
    const l = ensureStateDir(layout(path.join(tempDir(t), 'state')));
    writeEntry(l, {
      version: 1,
      id: 'sec',
      context: 'c',
      namespace: 'n',
      server: 's',
      phase: 'starting',
      createdAt: new Date().toISOString(),
      options: { clusterDomain: 'cluster.local', logLevel: 'info', connectTimeoutMs: 1, handshakeTimeoutMs: 1, shutdownGraceMs: 1 },
    });
    writeProxyAuthFile(l, 'sec', { username: 'u', password: 'p', source: 'file' });
    writePrivateFile(l.kubeconfigFile('sec'), 'x');
    assert.equal(mode(l.proxyDir('sec')), 0o700);
    for (const f of [l.stateFile('sec'), l.proxyAuthFile('sec'), l.kubeconfigFile('sec')]) assert.equal(mode(f), 0o600, f);
  } finally {
    process.umask(old);
  }
});

test(
  'service-install refuses a state directory owned by another user, as connect does: no unit names its log',
  { skip: !isRoot && 'needs root to chown' },
  async (t) => {
    const home = mkdtempSync(path.join(tmpdir(), 'proxyout-svc-home-'));
    t.after(() => rmSync(home, { recursive: true, force: true }));
    const shared = path.join(home, 'shared-state');
    mkdirSync(shared, { mode: 0o700 });
    chownSync(shared, NOBODY, NOBODY);
    for (const dryRun of [[], ['--dry-run']]) {
      const r = await runCli(['service-install', ...dryRun, '--listen-socks', '127.0.0.1:1080'], {
        env: { HOME: home, XDG_CONFIG_HOME: path.join(home, '.config'), KUBECTL_PROXYOUT_STATE_DIR: shared },
      });
      assert.equal(r.code, 1, `${dryRun.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /owned by another user|owned by uid/);
    }
    assert.equal(existsSync(path.join(home, '.config', 'systemd', 'user', 'kubectl-proxyout.service')), false, 'no unit written');
  },
);
