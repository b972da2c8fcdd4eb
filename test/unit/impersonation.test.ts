// kubeconfig impersonation beyond `as`: which entries count, the headers they become, and that a
// managed daemon's transient kubeconfig keeps them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { headerKeyEscape, impersonationHeaders, impersonationOf } from '../../src/cluster/impersonation.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { flattenKubeConfig } from '../../src/state/kubeconfig.js';
import { writeOneUserKubeconfig } from '../helpers/one-user-kubeconfig.js';

test('as-groups, as-uid and as-user-extra count only with as; each group and extra value is its own header line', () => {
  assert.equal(impersonationOf({ 'as-groups': ['g'] }), undefined, 'client-go impersonates only with a user');
  assert.equal(impersonationOf({ as: 'bob' }), undefined, 'as alone: client-node already sends it');
  const imp = impersonationOf({ as: 'bob', 'as-groups': ['a', 'b', 7], 'as-uid': 'u1', 'as-user-extra': { 'scopes/x': ['r', 'w'], empty: [] } });
  assert.deepEqual(imp, { groups: ['a', 'b'], uid: 'u1', extra: { 'scopes/x': ['r', 'w'], empty: [] } });
  assert.deepEqual(impersonationHeaders(imp!), {
    'Impersonate-Group': ['a', 'b'],
    'Impersonate-Uid': ['u1'],
    'Impersonate-Extra-scopes%2Fx': ['r', 'w'],
  });
});

test('an extra key is escaped as client-go escapes it: bytes outside the token set, and %', () => {
  const cases: Array<[string, string]> = [
    ['scopes(read)', 'scopes%28read%29'],
    ['example.com/scopes', 'example.com%2Fscopes'],
    ['100%', '100%25'],
    ['a b:c', 'a%20b%3Ac'],
    ['ä', '%C3%A4'],
    ["it's~ok_!#$&*+-.^`|", "it's~ok_!#$&*+-.^`|"],
  ];
  for (const [key, escaped] of cases) {
    assert.equal(headerKeyEscape(key), escaped, key);
    http.validateHeaderName(`Impersonate-Extra-${escaped}`); // Node refuses a name that is not a token
  }
});

test('an extra key with parentheses reaches the API server instead of failing every request', async (t) => {
  const seen: Array<string | string[] | undefined> = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers['impersonate-extra-scopes%28read%29']);
    res.end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const dir = mkdtempSync(path.join(tmpdir(), 'proxyout-impersonation-'));
  t.after(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const port = (server.address() as AddressInfo).port;
  const file = writeOneUserKubeconfig(dir, '{token: t, as: alice, as-user-extra: {"scopes(read)": [x]}}', { server: `http://127.0.0.1:${port}` });
  await new ApiConnection(loadKubeConfig({ kubeconfig: file }).kc, { env: {} }).getJson('/version', 5_000);
  assert.deepEqual(seen, ['x']);
});

test('the transient kubeconfig of a managed daemon keeps the impersonation', () => {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: true }],
    users: [{ name: 'u', token: 't', impersonateUser: 'bob' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const out = flattenKubeConfig(kc, 'ns', undefined, { groups: ['devs'], uid: 'u1', extra: {} }) as { users: Array<{ user: Record<string, unknown> }> };
  assert.deepEqual(out.users[0]!.user, { token: 't', as: 'bob', 'as-groups': ['devs'], 'as-uid': 'u1' });
});
