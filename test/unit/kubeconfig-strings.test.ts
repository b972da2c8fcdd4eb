// YAML reads an unquoted `name: 1.30` as a number and `name: no` as false: kubectl refuses such a
// kubeconfig ("cannot unmarshal number into … of type string"); the proxy said the context it
// lists was not found, or that a context names a user the file defines.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';

function load(t: { after(fn: () => void): void }, lines: string[], context?: string) {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-kubeconfig-strings-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config');
  writeFileSync(file, ['apiVersion: v1', 'kind: Config', ...lines, ''].join('\n'));
  return () => loadKubeConfig({ kubeconfig: file, context });
}

const CLUSTER = 'clusters: [{name: c, cluster: {server: "https://c.example:6443"}}]';

test('a context name YAML reads as a number is refused naming the field, as kubectl refuses the file', (t) => {
  const run = load(
    t,
    [CLUSTER, 'users: [{name: u, user: {token: t}}]', 'contexts: [{name: prod, context: {cluster: c, user: u}}, {name: 1.30, context: {cluster: c, user: u}}]'],
    '1.30',
  );
  assert.throws(run, /: contexts\[1\]\.name is a number to YAML, not a string \(kubectl refuses it too\): quote it$/);
});

test('a user name YAML reads as a number, or a context reference as a boolean, is refused too', (t) => {
  const num = load(t, [CLUSTER, 'users: [{name: 0123, user: {token: t}}]', 'contexts: [{name: prod, context: {cluster: c, user: 0123}}]'], 'prod');
  assert.throws(num, /: users\[0\]\.name is a number to YAML, not a string/);
  const bool = load(t, [CLUSTER, 'users: [{name: u, user: {token: t}}]', 'contexts: [{name: prod, context: {cluster: c, user: u, namespace: no}}]'], 'prod');
  assert.throws(bool, /: contexts\[0\]\.context\.namespace is a boolean to YAML, not a string/);
});

test('a token YAML reads as a number is refused without showing it', (t) => {
  const run = load(t, [CLUSTER, 'users: [{name: u, user: {token: 31415926}}]', 'contexts: [{name: prod, context: {cluster: c, user: u}}]'], 'prod');
  assert.throws(run, (err: Error) => {
    assert.match(err.message, /: users\[0\]\.user\.token is a number to YAML, not a string/);
    assert.doesNotMatch(err.message, /31415926/);
    return true;
  });
});

test('the same names quoted load', (t) => {
  const run = load(
    t,
    [CLUSTER, 'users: [{name: "0123", user: {token: "31415926"}}]', 'contexts: [{name: "1.30", context: {cluster: c, user: "0123", namespace: "no"}}]'],
    '1.30',
  );
  const l = run();
  assert.equal(l.context, '1.30');
  assert.equal(l.namespace, 'no');
  assert.equal(l.kc.getCurrentUser()?.name, '0123');
});
