// The state directory: location, layout and modes, atomic entries, the lock, connection IDs and
// the transient kubeconfig. Real files in temp dirs.
import { test } from 'node:test';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import type { RequestOptions } from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';
import { checkSocketPath, ensureStateDir, layout, stateDir, stateDirExists, StateDirError, validateId } from '../../src/state/paths.js';
import { withStateLock } from '../../src/state/lock.js';
import { ownProcessSpace } from '../../src/state/process-space.js';
import { connectionId, listIds, readEntry, removeEntry, removeTransient, updateEntry, writeEntry } from '../../src/managed/store.js';
import { flattenKubeConfig, writeTransientKubeConfig } from '../../src/state/kubeconfig.js';
import { proxyEntry } from '../helpers/proxy-entry.js';
import { inspect } from '../../src/managed/registry.js';

function tempDir(t: { after(fn: () => void): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-state-unit-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const mode = (p: string) => statSync(p).mode & 0o777;

const entry = proxyEntry;

test('KUBECTL_PROXYOUT_STATE_DIR overrides; otherwise XDG_STATE_HOME-style on Linux', () => {
  assert.equal(stateDir({ KUBECTL_PROXYOUT_STATE_DIR: '/x/y' }), '/x/y');
  assert.equal(stateDir({ KUBECTL_PROXYOUT_STATE_DIR: 'rel' }), path.resolve('rel'));
  // Unexpanded by a .env file or a service's Environment=: the home directory, not ./~.
  assert.equal(stateDir({ KUBECTL_PROXYOUT_STATE_DIR: '~/x' }), path.join(homedir(), 'x'));
  assert.equal(stateDir({ KUBECTL_PROXYOUT_STATE_DIR: '~' }), homedir());
  assert.equal(stateDir({ KUBECTL_PROXYOUT_STATE_DIR: '~x/y' }), path.resolve('~x/y'));
  if (process.platform === 'linux') {
    assert.equal(stateDir({ XDG_STATE_HOME: '/xdg/state' }), '/xdg/state/kubectl-proxyout');
    const home = path.join(homedir(), '.local', 'state', 'kubectl-proxyout');
    assert.equal(stateDir({}), home);
    // The XDG spec: a relative path is invalid and ignored (else each working directory had its own).
    assert.equal(stateDir({ XDG_STATE_HOME: 'rel/state' }), home);
  }
});

test('the documented layout', () => {
  const l = layout('/s');
  assert.equal(l.stateFile('abc'), '/s/proxies/abc/state.json');
  assert.equal(l.kubeconfigFile('abc'), '/s/proxies/abc/kubeconfig');
  assert.equal(l.controlSocket('abc'), '/s/proxies/abc/control.sock');
  assert.equal(l.logFile('abc'), '/s/logs/abc.log');
});

test('IDs: a-z, 0-9 and "-", 1 to 40 characters; nothing that leaves a directory', () => {
  for (const ok of ['a', 'prod-eu-1', 'x'.repeat(40), '0123abcd']) assert.equal(validateId(ok), ok);
  for (const bad of ['', 'x'.repeat(41), 'Prod', '../etc', 'a/b', 'a.b', 'a b', 'a_b']) {
    assert.throws(() => validateId(bad), StateDirError, bad);
  }
  assert.throws(() => layout('/s').proxyDir('../x'), StateDirError);
});

test('connection ID: 8 hex characters, stable for server + context + namespace', () => {
  const a = connectionId('https://a:6443', 'prod', 'shop');
  assert.match(a, /^[0-9a-f]{8}$/);
  assert.equal(connectionId('https://a:6443', 'prod', 'shop'), a);
  assert.notEqual(connectionId('https://a:6443', 'prod', 'other'), a);
  assert.notEqual(connectionId('https://a:6443', 'staging', 'shop'), a);
  assert.notEqual(connectionId('https://b:6443', 'prod', 'shop'), a);
});

test('ensureStateDir creates 0700 directories even under a permissive umask', (t) => {
  const root = path.join(tempDir(t), 'deep', 'state');
  const old = process.umask(0);
  try {
    const l = ensureStateDir(layout(root));
    for (const dir of [l.root, l.proxiesDir, l.logsDir]) assert.equal(mode(dir), 0o700, dir);
  } finally {
    process.umask(old);
  }
});

test('refuses a state directory writable by group or others, or not a directory', (t) => {
  const base = tempDir(t);
  const open = path.join(base, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  assert.throws(() => ensureStateDir(layout(open)), /writable by group or others \(mode 777\)/);
  chmodSync(open, 0o775);
  assert.throws(() => stateDirExists(layout(open)), /writable by group or others/);
  chmodSync(open, 0o755); // readable is fine: what matters is that nobody else can write
  assert.doesNotThrow(() => ensureStateDir(layout(open)));
  const file = path.join(base, 'file');
  writeFileSync(file, '');
  assert.throws(() => ensureStateDir(layout(file)), /not a directory/);
  assert.equal(stateDirExists(layout(path.join(base, 'none'))), false);
});

test('a control socket path that is too long is refused before anything starts', () => {
  assert.doesNotThrow(() => checkSocketPath('/tmp/x/proxies/abcd1234/control.sock'));
  assert.throws(() => checkSocketPath(`/${'d'.repeat(120)}/control.sock`), /too long for a unix socket.*KUBECTL_PROXYOUT_STATE_DIR/);
});

test('entries: written 0600 in a 0700 directory, atomically, read back, updated, removed', (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  const old = process.umask(0);
  try {
    writeEntry(l, entry('abc'));
  } finally {
    process.umask(old);
  }
  assert.equal(mode(l.proxyDir('abc')), 0o700);
  assert.equal(mode(l.stateFile('abc')), 0o600);
  assert.equal(readEntry(l, 'abc')?.phase, 'starting');
  updateEntry(l, 'abc', (e) => (e.phase = 'running'));
  assert.equal(readEntry(l, 'abc')?.phase, 'running');
  assert.equal(mode(l.stateFile('abc')), 0o600);
  assert.deepEqual(readdirSync(l.proxyDir('abc')), ['state.json'], 'no temporary files left');
  assert.equal(
    updateEntry(l, 'nope', () => undefined),
    undefined,
  );
  assert.deepEqual(listIds(l), ['abc']);

  writeFileSync(l.kubeconfigFile('abc'), 'secret', { mode: 0o600 });
  removeTransient(l, 'abc');
  assert.ok(!existsSync(l.kubeconfigFile('abc')));
  assert.ok(existsSync(l.stateFile('abc')), 'a tombstone keeps state.json');
  removeEntry(l, 'abc');
  assert.ok(!existsSync(l.proxyDir('abc')));
  assert.deepEqual(listIds(l), []);
});

test('an unreadable or foreign state.json reads as no entry', (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  mkdirSync(l.proxyDir('bad'));
  writeFileSync(l.stateFile('bad'), '{"version":1,"id":"other"}');
  assert.equal(readEntry(l, 'bad'), undefined);
  writeFileSync(l.stateFile('bad'), '{not json');
  assert.equal(readEntry(l, 'bad'), undefined);
});

test('a state.json that cannot be read (another owner, mode 000, a directory) is an error naming it, not an orphan', (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  mkdirSync(l.stateFile('locked'), { recursive: true });
  assert.throws(
    () => readEntry(l, 'locked'),
    (err: unknown) =>
      err instanceof StateDirError &&
      err.message.includes(`cannot read the state of proxy locked (${l.stateFile('locked')}: EISDIR)`) &&
      err.message.includes(`or remove ${l.proxyDir('locked')}`),
  );
  assert.throws(() => inspect(l, 'locked'), StateDirError);
  assert.ok(existsSync(l.stateFile('locked')), 'kept: its daemon may run');
});

test('the state lock serialises concurrent changes', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  const events: string[] = [];
  const holder = (name: string) =>
    withStateLock(l, async () => {
      events.push(`${name}+`);
      await new Promise((r) => setTimeout(r, 60));
      events.push(`${name}-`);
    });
  await Promise.all([holder('a'), holder('b'), holder('c')]);
  for (let i = 0; i < events.length; i += 2) assert.equal(events[i]!.slice(0, -1), events[i + 1]!.slice(0, -1), events.join(' '));
  assert.ok(!existsSync(l.lockFile), 'released');
});

test('a stale lock (its holder crashed) is taken over', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  mkdirSync(l.lockFile);
  const old = new Date(Date.now() - 60_000);
  utimesSync(l.lockFile, old, old);
  // Not taken over, the lock would be waited for (~19 s) and then refused: the answer shows it was.
  assert.equal(await withStateLock(l, () => 42), 42);
});

/** A process holding the state lock of `root` until killed (it says "held" once it has it). */
async function lockHolder(root: string): Promise<ChildProcess> {
  const lockJs = new URL('../../src/state/lock.js', import.meta.url).href;
  const pathsJs = new URL('../../src/state/paths.js', import.meta.url).href;
  const script = `const { withStateLock } = await import(${JSON.stringify(lockJs)});
const { layout } = await import(${JSON.stringify(pathsJs)});
await withStateLock(layout(${JSON.stringify(root)}), () => { setInterval(() => {}, 1000); console.log('held'); return new Promise(() => {}); });`;
  const holder = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(holder.stdout!, 'data');
  return holder;
}

test('a lock whose holder was killed is taken without waiting for it to go stale; a living holder is waited for', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  const holder = await lockHolder(l.root);
  try {
    await assert.rejects(
      withStateLock(l, () => 'stolen', { until: Date.now() + 1_000 }),
      /stays locked/,
    );
  } finally {
    holder.kill('SIGKILL');
  }
  await once(holder, 'exit');
  // A deadline short of the lock's stale time (10 s): only the record of its holder, gone, lets it
  // be taken by then.
  assert.equal(await withStateLock(l, () => 42, { until: Date.now() + 5_000 }), 42);
  assert.deepEqual(
    readdirSync(l.root).filter((f) => f.startsWith('lock')),
    [],
    'no lock or record of a holder left',
  );
});

test("a lock recorded by another boot of the same hostname is waited for: it may be another machine's", async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  mkdirSync(l.lockFile);
  // A dead pid in a process space that differs only by its boot: a second machine (an NFS home,
  // two containers named alike) whose holder is alive there.
  const dead = spawn(process.execPath, ['-e', '']);
  await once(dead, 'exit');
  const space = { ...ownProcessSpace(), boot: process.platform === 'linux' ? 'another-boot' : '1' };
  writeFileSync(`${l.lockFile}.holder`, JSON.stringify({ pid: dead.pid, space, ino: statSync(l.lockFile).ino }));
  await assert.rejects(
    withStateLock(l, () => 'stolen', { until: Date.now() + 1_000 }),
    /stays locked/,
  );
  assert.ok(existsSync(l.lockFile), 'the lock is left to its holder');
});

test('a lock its holder left while the clock ran ahead (now stepped back) is taken over, not waited out', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  mkdirSync(l.lockFile);
  const ahead = new Date(Date.now() + 3_600_000);
  utimesSync(l.lockFile, ahead, ahead);
  const began = Date.now();
  // Not taken over, the lock would be waited for (~19 s) and then refused.
  assert.equal(await withStateLock(l, () => 42), 42);
  assert.ok(Date.now() - began < 2_000, `took ${Date.now() - began} ms`);
});

test('a lock wait with a deadline gives up by then (a stopping daemon), where it would wait ~19 s', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  let outcome: unknown;
  await withStateLock(l, async () => {
    const waiting = withStateLock(l, () => 'taken', { until: Date.now() + 300 }).then(
      (v) => v,
      (err: unknown) => err,
    );
    // Held 3 s: a waiter without its deadline would take the lock after that.
    await new Promise((r) => setTimeout(r, 3_000));
    outcome = await Promise.race([waiting, 'still waiting']);
  });
  assert.ok(outcome instanceof StateDirError, String(outcome));
  await assert.rejects(
    withStateLock(l, () => 'late', { until: Date.now() - 1 }),
    StateDirError,
    'no time left: not even tried',
  );
  assert.equal(await withStateLock(l, () => 'free', { until: Date.now() + 1_000 }), 'free');
});

test('a state directory where the lock cannot be made fails at once, naming it, instead of being waited for', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  // Where the lock goes is a file's child: every try fails as a read-only or full disk does, not as a held lock.
  writeFileSync(path.join(l.root, 'blocker'), '');
  const began = Date.now();
  await assert.rejects(
    withStateLock({ ...l, lockFile: path.join(l.root, 'blocker', 'lock') }, () => 'taken'),
    (err: Error) => err instanceof StateDirError && err.message.includes(`cannot take the state lock in ${l.root}`) && /ENOTDIR/.test(err.message),
  );
  assert.ok(Date.now() - began < 2_000, `gave up after ${Date.now() - began} ms, not at once`);
});

test('the lock is released when the function throws', async (t) => {
  const l = ensureStateDir(layout(tempDir(t)));
  await assert.rejects(
    withStateLock(l, () => {
      throw new Error('boom');
    }),
    /boom/,
  );
  assert.equal(await withStateLock(l, () => 'again'), 'again');
});

test('transient kubeconfig: the chosen context only, CA embedded, client cert files kept, exec kept, 0600', (t) => {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'ca.crt'), 'CA-PEM');
  writeFileSync(path.join(dir, 'client.crt'), 'CERT-PEM');
  writeFileSync(path.join(dir, 'client.key'), 'KEY-PEM');
  const source = path.join(dir, 'config');
  writeFileSync(
    source,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'other',
      clusters: [
        { name: 'c1', cluster: { server: 'https://one:6443', 'certificate-authority': 'ca.crt', 'tls-server-name': 'api.one' } },
        { name: 'c2', cluster: { server: 'https://two:6443', 'insecure-skip-tls-verify': true } },
      ],
      users: [
        { name: 'u1', user: { 'client-certificate': 'client.crt', 'client-key': 'client.key' } },
        {
          name: 'u2',
          user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: './bin/auth', args: ['--x'], env: [{ name: 'A', value: 'b' }] } },
        },
        { name: 'u3', user: { token: 'super-secret-token' } },
      ],
      contexts: [
        { name: 'mine', context: { cluster: 'c1', user: 'u1', namespace: 'ns1' } },
        { name: 'execy', context: { cluster: 'c2', user: 'u2' } },
        { name: 'other', context: { cluster: 'c2', user: 'u3' } },
      ],
    }),
  );
  const kc = new KubeConfig();
  kc.loadFromFile(source);
  kc.setCurrentContext('mine');
  const flat = flattenKubeConfig(kc, 'shop') as any;
  assert.equal(flat['current-context'], 'mine');
  assert.equal(flat.contexts.length, 1);
  assert.equal(flat.clusters.length, 1);
  assert.equal(flat.users.length, 1);
  assert.deepEqual(flat.contexts[0], { name: 'mine', context: { cluster: 'c1', user: 'u1', namespace: 'shop' } });
  assert.equal(flat.clusters[0].cluster['certificate-authority-data'], Buffer.from('CA-PEM').toString('base64'));
  assert.equal(flat.clusters[0].cluster['tls-server-name'], 'api.one');
  assert.equal(flat.clusters[0].cluster['certificate-authority'], undefined);
  // Certificate and key files stay files (renewed in place, read again): absolute paths.
  assert.equal(flat.users[0].user['client-certificate'], path.join(dir, 'client.crt'));
  assert.equal(flat.users[0].user['client-key'], path.join(dir, 'client.key'));
  assert.equal(flat.users[0].user['client-certificate-data'], undefined);
  assert.ok(!JSON.stringify(flat).includes('super-secret-token'), 'other users are left out');

  kc.setCurrentContext('execy');
  const execFlat = flattenKubeConfig(kc, 'default') as any;
  assert.deepEqual(execFlat.users[0].user.exec, {
    apiVersion: 'client.authentication.k8s.io/v1',
    command: './bin/auth',
    args: ['--x'],
    env: [{ name: 'A', value: 'b' }],
  });
  assert.equal(execFlat.clusters[0].cluster['insecure-skip-tls-verify'], true);

  const out = path.join(dir, 'transient');
  kc.setCurrentContext('mine');
  writeTransientKubeConfig(out, kc, 'shop');
  assert.equal(mode(out), 0o600);
  const back = new KubeConfig();
  back.loadFromFile(out);
  assert.equal(back.getCurrentContext(), 'mine');
  assert.equal(back.getCurrentCluster()?.server, 'https://one:6443');
  assert.equal(back.getCurrentUser()!.keyFile, path.join(dir, 'client.key'));
  assert.equal(readFileSync(out, 'utf8').includes('KEY-PEM'), false, 'the key stays in its file');
});

test('transient kubeconfig: a renewed client certificate and key are what the daemon sends', async (t) => {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'client.crt'), 'CERT-v1');
  writeFileSync(path.join(dir, 'client.key'), 'KEY-v1');
  const user = (u: object) =>
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'x',
      clusters: [{ name: 'c', cluster: { server: 'https://one:6443', 'insecure-skip-tls-verify': true } }],
      users: [{ name: 'u', user: u }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    });
  const source = path.join(dir, 'config');
  writeFileSync(source, user({ 'client-certificate': 'client.crt', 'client-key': 'client.key' }));
  const kc = new KubeConfig();
  kc.loadFromFile(source);
  const out = path.join(dir, 'transient');
  writeTransientKubeConfig(out, kc, 'default');
  // The certificate tool renews both in place, as kubectl and client-go expect.
  writeFileSync(path.join(dir, 'client.crt'), 'CERT-v2');
  writeFileSync(path.join(dir, 'client.key'), 'KEY-v2');
  const daemon = new KubeConfig();
  daemon.loadFromFile(out);
  const opts: RequestOptions = { headers: {} };
  await daemon.applyToHTTPSOptions(opts);
  assert.equal(String(opts.cert), 'CERT-v2');
  assert.equal(String(opts.key), 'KEY-v2');

  // A certificate file with an inline key is embedded whole: it stands alone as it is.
  writeFileSync(source, user({ 'client-certificate': 'client.crt', 'client-key-data': Buffer.from('KEY-inline').toString('base64') }));
  const mixed = new KubeConfig();
  mixed.loadFromFile(source);
  const flat = flattenKubeConfig(mixed, 'default') as { users: Array<{ user: Record<string, string> }> };
  assert.equal(flat.users[0]!.user['client-certificate-data'], Buffer.from('CERT-v2').toString('base64'));
  assert.equal(flat.users[0]!.user['client-certificate'], undefined);
});

test('a missing client certificate file is refused when the transient kubeconfig is made', (t) => {
  const dir = tempDir(t);
  writeFileSync(path.join(dir, 'client.key'), 'KEY');
  const source = path.join(dir, 'config');
  writeFileSync(
    source,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'x',
      clusters: [{ name: 'c', cluster: { server: 'https://one:6443' } }],
      users: [{ name: 'u', user: { 'client-certificate': 'gone.crt', 'client-key': 'client.key' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    }),
  );
  const kc = new KubeConfig();
  kc.loadFromFile(source);
  assert.throws(() => flattenKubeConfig(kc, 'default'), /cannot read the client-certificate file .*gone\.crt of user "u"/);
});

test('a missing certificate file is a one-line error naming it', (t) => {
  const dir = tempDir(t);
  const source = path.join(dir, 'config');
  writeFileSync(
    source,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      'current-context': 'x',
      clusters: [{ name: 'c', cluster: { server: 'https://one:6443', 'certificate-authority': 'missing-ca.crt' } }],
      users: [{ name: 'u', user: { token: 't' } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
    }),
  );
  const kc = new KubeConfig();
  kc.loadFromFile(source);
  assert.throws(() => flattenKubeConfig(kc, 'default'), /cannot read the certificate-authority file .*missing-ca\.crt of cluster "c"/);
});
