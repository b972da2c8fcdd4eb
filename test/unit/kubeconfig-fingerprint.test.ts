// A route whose credentials the API server refuses looks at the kubeconfig every 3 s
// (proxy/credential-reload.ts). With many such routes and a big kubeconfig, merging it anew for
// each (synchronous: 5–40 ms for 200–2000 contexts) stalled every stream of the proxy for a second
// at a time: an unchanged kubeconfig is merged once, an edited one again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs, { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { contextFingerprint } from '../../src/cluster/kubeconfig-files.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';

const kubeconfig = (token: string) =>
  [
    'apiVersion: v1',
    'kind: Config',
    'clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]',
    `users: [{name: u, user: {token: ${token}}}]`,
    'contexts: [{name: prod, context: {cluster: c, user: u}}]',
    '',
  ].join('\n');

test('an unchanged kubeconfig is read once however often a fingerprint is asked for; an edit is seen', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-fingerprint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  writeFileSync(file, kubeconfig('old-token'));
  // Written a while ago: a file written just now is read again (another write may follow in the same timestamp tick).
  const past = new Date(Date.now() - 60_000);
  fs.utimesSync(file, past, past);
  let reads = 0;
  const readFileSync = fs.readFileSync;
  t.mock.method(fs, 'readFileSync', (...args: Parameters<typeof fs.readFileSync>) => {
    if (args[0] === file) reads++;
    return readFileSync(...args);
  });
  syncBuiltinESMExports();
  t.after(() => {
    t.mock.restoreAll();
    syncBuiltinESMExports();
  });
  const first = contextFingerprint(file, 'prod');
  assert.match(first, /old-token/);
  for (let i = 0; i < 200; i++) assert.equal(contextFingerprint(file, 'prod'), first);
  assert.equal(reads, 1);
  // `oc login` writes a new token (through a temporary file and a rename, as editors do too).
  writeFileSync(`${file}.tmp`, kubeconfig('new-token'));
  renameSync(`${file}.tmp`, file);
  assert.match(contextFingerprint(file, 'prod'), /new-token/);
  // Written in place again at once, the same size: seen too, also twice in one timestamp tick.
  writeFileSync(file, kubeconfig('nex-token'));
  assert.match(contextFingerprint(file, 'prod'), /nex-token/);
  writeFileSync(file, kubeconfig('ney-token'));
  assert.match(contextFingerprint(file, 'prod'), /ney-token/);
});

test('each route loading its context reads an unchanged kubeconfig once, and what one load changes stays its own', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-fingerprint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  const contexts = Array.from({ length: 50 }, (_, i) => `{name: c${i}, context: {cluster: c, user: ex}}`);
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]',
      'users: [{name: ex, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: cred, provideClusterInfo: true, interactiveMode: Never}}}]',
      `contexts: [${contexts.join(', ')}]`,
      '',
    ].join('\n'),
  );
  const past = new Date(Date.now() - 60_000);
  fs.utimesSync(file, past, past);
  let reads = 0;
  const readFileSync = fs.readFileSync;
  t.mock.method(fs, 'readFileSync', (...args: Parameters<typeof fs.readFileSync>) => {
    if (args[0] === file) reads++;
    return readFileSync(...args);
  });
  syncBuiltinESMExports();
  t.after(() => {
    t.mock.restoreAll();
    syncBuiltinESMExports();
  });
  const before = contextFingerprint(file, 'c0');
  for (let i = 0; i < 50; i++) {
    const env = loadKubeConfig({ kubeconfig: file, context: `c${i}` }).kc.getCurrentUser()?.exec.env as Array<{ name: string }>;
    // The exec info is added to this load's user, once, not to the kept merge.
    assert.deepEqual(
      env.map((e) => e.name),
      ['KUBERNETES_EXEC_INFO'],
    );
  }
  assert.equal(reads, 1);
  assert.equal(contextFingerprint(file, 'c0'), before);
});

test('a loaded context keeps only its own context, cluster and user, not the whole kubeconfig', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-fingerprint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  const n = Array.from({ length: 20 }, (_, i) => i);
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [${n.map((i) => `{name: cl${i}, cluster: {server: "https://c${i}.example:6443"}}`).join(', ')}]`,
      `users: [${n.map((i) => `{name: u${i}, user: {token: t${i}}}`).join(', ')}]`,
      `contexts: [${n.map((i) => `{name: c${i}, context: {cluster: cl${i}, user: u${i}}}`).join(', ')}]`,
      '',
    ].join('\n'),
  );
  // Each route of a table keeps its KubeConfig: 200 routes of a 2000-context kubeconfig held 800 MB.
  const { kc, server } = loadKubeConfig({ kubeconfig: file, context: 'c7' });
  assert.deepEqual([kc.getContexts().map((c) => c.name), kc.getClusters().map((c) => c.name), kc.getUsers().map((u) => u.name)], [['c7'], ['cl7'], ['u7']]);
  assert.equal(server, 'https://c7.example:6443');
  assert.equal(kc.getCurrentUser()?.token, 't7');
});

test('a CA file rewritten in place changes the fingerprint (a managed daemon embedded the old CA)', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-fingerprint-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  const ca = path.join(dir, 'ca.crt');
  writeFileSync(ca, 'old CA');
  writeFileSync(file, kubeconfig('t').replace('server: "https://c.example:6443"', `server: "https://c.example:6443", certificate-authority: "${ca}"`));
  const before = contextFingerprint(file, 'prod');
  assert.equal(contextFingerprint(file, 'prod'), before, 'unchanged: the same');
  writeFileSync(ca, 'a new, rotated CA');
  assert.notEqual(contextFingerprint(file, 'prod'), before);
});
