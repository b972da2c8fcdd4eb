// `status` for a daemon whose cache is still on its first sync: per kind the objects listed so
// far, of how many when known (src/managed/status.ts cacheSummary, src/cli/status-table.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cacheSummary } from '../../src/managed/status.js';
import { cacheCell, statusTable } from '../../src/cli/status-table.js';
import { proxyStatusFixture } from '../helpers/proxy-status.js';

test('a syncing cache shows its progress per kind; a synced one just says so', () => {
  const syncing = cacheSummary({
    scope: 'cluster',
    namespaces: [],
    watches: { '/api/v1/services': 'synced', '/apis/discovery.k8s.io/v1/endpointslices': 'starting' },
    syncing: { endpointslices: { listed: 4000, total: 10000 }, namespaces: { listed: 12 } },
  });
  assert.deepEqual(syncing, {
    state: 'syncing',
    scope: 'cluster',
    namespaces: [],
    syncing: { endpointslices: { listed: 4000, total: 10000 }, namespaces: { listed: 12 } },
  });
  assert.equal(cacheCell(syncing), 'syncing (endpointslices 4000/10000, namespaces 12)');
  const synced = cacheSummary({ scope: 'cluster', namespaces: [], watches: { '/api/v1/services': 'synced' } });
  assert.equal(cacheCell(synced), 'synced');
  const row = proxyStatusFixture({ id: 'big', state: 'starting', namespace: 'default', server: 'https://x', socks: null, uptimeSeconds: 3, cache: syncing });
  assert.match(statusTable([row])[1]!, /starting .* syncing \(endpointslices 4000\/10000, namespaces 12\)$/);
});
