// kubeconfig impersonation beyond `as`: which entries count, the headers they become, and that a
// managed daemon's transient kubeconfig keeps them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeConfig } from '@kubernetes/client-node';
import { impersonationHeaders, impersonationOf } from '../../src/cluster/impersonation.js';
import { flattenKubeConfig } from '../../src/state/kubeconfig.js';

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
