// What `connect` compares before calling a running proxy "already running": who the requests are
// made as, never the secrets, which renew under one identity.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { credentialIdentity } from '../../src/managed/table.js';

const kubeconfig = (user: string, auth: string) => `apiVersion: v1
kind: Config
clusters:
- name: prod
  cluster: {server: 'https://127.0.0.1:6443', insecure-skip-tls-verify: true}
contexts:
- name: prod
  context: {cluster: prod, user: ${user}}
current-context: prod
users:
- name: ${user}
  user: ${auth}
`;

test('a renewed token keeps the identity; another user, exec role or file is another', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-identity-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const identity = (name: string, text: string) => {
    const file = path.join(dir, name);
    writeFileSync(file, text);
    return credentialIdentity(loadKubeConfig({ kubeconfig: file }), file);
  };
  const first = identity('a', kubeconfig('admin', '{token: one}'));
  assert.equal(first.user, 'admin');
  assert.deepEqual(first.files, [path.join(dir, 'a')]);
  assert.ok(!JSON.stringify(first).includes('one'), 'no secret in it');
  assert.equal(identity('a', kubeconfig('admin', '{token: two}')).key, first.key, 'a new token (oc login, a refresh)');
  assert.notEqual(identity('a', kubeconfig('viewer', '{token: one}')).key, first.key, 'another user entry');
  assert.notEqual(identity('b', kubeconfig('admin', '{token: one}')).key, first.key, 'another kubeconfig file');
  const role = (arn: string) => `{exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws, args: [eks, get-token, --role-arn, ${arn}]}}`;
  assert.notEqual(identity('a', kubeconfig('admin', role('admin'))).key, identity('a', kubeconfig('admin', role('readonly'))).key, 'another exec role');
});
