// A kubeconfig entry kubectl takes but cannot use — a context without a cluster (`kubectl config
// set-context dev --namespace dev` writes one), a cluster without a server, an entry without a
// name — stops only the context that uses it, as with kubectl; the others load.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { mergeKubeconfigFiles } from '../../src/cluster/kubeconfig-files.js';

const KUBECONFIG = [
  'apiVersion: v1',
  'kind: Config',
  'clusters:',
  '- {name: prod, cluster: {server: "https://prod.example:6443"}}',
  '- {name: no-server, cluster: {certificate-authority-data: eA==}}',
  '- {name: no-body}',
  '- {cluster: {server: "https://nameless.example:6443"}}',
  'users:',
  '- {name: u, user: {token: t}}',
  '- {user: {token: nameless}}',
  'contexts:',
  '- {name: prod, context: {cluster: prod, user: u}}',
  '- {name: dev, context: {namespace: dev}}',
  '- {name: bare}',
  '- {name: uses-no-server, context: {cluster: no-server, user: u}}',
  '- {context: {cluster: prod, user: u}}',
  'current-context: prod',
  '',
].join('\n');

function setup(t: { after(fn: () => void): void }) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-kubeconfig-incomplete-'));
  const saved = process.env.KUBECONFIG;
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
    if (saved === undefined) delete process.env.KUBECONFIG;
    else process.env.KUBECONFIG = saved;
  });
  const file = path.join(dir, 'config');
  writeFileSync(file, KUBECONFIG);
  process.env.KUBECONFIG = file;
  return file;
}

test('a context without a cluster or a cluster without a server does not stop the other contexts', (t) => {
  const file = setup(t);
  const l = loadKubeConfig({});
  assert.equal(l.context, 'prod');
  assert.equal(l.server, 'https://prod.example:6443');
  assert.deepEqual(
    mergeKubeconfigFiles([file]).contexts.map((c) => c.name),
    ['prod', 'uses-no-server'],
  );
});

test('choosing such a context says what it lacks and how to add it', (t) => {
  setup(t);
  assert.throws(
    () => loadKubeConfig({ context: 'dev' }),
    /^StartupError: context "dev" names no cluster \(kubectl would send its requests to localhost:8080\): set one with kubectl config set-context dev --cluster=NAME$/,
  );
  assert.throws(() => loadKubeConfig({ context: 'bare' }), /context "bare" names no cluster/);
  assert.throws(
    () => loadKubeConfig({ context: 'uses-no-server' }),
    /^StartupError: context "uses-no-server" names cluster "no-server", which has no server: set one with kubectl config set-cluster no-server --server=URL$/,
  );
});

test('a current-context without a cluster says so too', (t) => {
  const file = setup(t);
  writeFileSync(file, KUBECONFIG.replace('current-context: prod', 'current-context: dev'));
  assert.throws(() => loadKubeConfig({}), /^StartupError: context "dev" names no cluster/);
});
