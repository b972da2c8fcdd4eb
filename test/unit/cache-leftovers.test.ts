// cluster/cache.ts and cluster/on-demand-namespaces.ts: what a watch set that failed or was
// stopped had listed leaves the index with it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { NotAllowedError } from '../../src/core/errors.js';
import { Resolver } from '../../src/routes/cluster/resolver.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

const service = (namespace: string, name: string, ip: string) => ({
  metadata: { namespace, name, resourceVersion: '5', uid: `${namespace}-${name}` },
  spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ port: 80, protocol: 'TCP', targetPort: 8080 }] },
});
const list = (res: ServerResponse, items: unknown[]) =>
  res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items }));
const openWatch = (res: ServerResponse) => void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();

test('a namespace whose watch is refused part-way leaves no Service behind: its ClusterIP is not claimed, and goes to the next owner', async () => {
  let defaultServices: ServerResponse | undefined;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (!url.pathname.includes('/namespaces/')) return sendStatus(res, 403, 'not allowed at cluster scope');
    // Services may be listed in x, EndpointSlices not (a Role written for the Endpoints API).
    if (url.pathname.includes('/namespaces/x/endpointslices')) return sendStatus(res, 403, 'endpointslices is forbidden in x');
    if (url.searchParams.get('watch')) {
      if (url.pathname === '/api/v1/namespaces/default/services') defaultServices = res;
      return openWatch(res);
    }
    list(res, url.pathname === '/api/v1/namespaces/x/services' ? [service('x', 'db', '10.96.0.50')] : []);
  });
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'default');
  try {
    await cache.start();
    assert.equal(cache.status().scope, 'namespaces');
    assert.equal(cache.knowsIp('10.96.0.50'), false); // builds the index
    await assert.rejects(cache.ensureNamespace('x'), /endpointslices is forbidden in x/);
    assert.equal(cache.knowsIp('10.96.0.50'), false, 'no cluster-known address for a namespace we do not watch');
    assert.equal(cache.lookup.service('x', 'db'), undefined);
    // Not "no ready endpoint" (a Service we do not watch): an address no cluster knows.
    await assert.rejects(new Resolver(cache, 'cluster.local').resolve({ type: 'ipv4', host: '10.96.0.50', port: 80 }), NotAllowedError);
    // The address is given to a Service in a namespace we do watch: that one owns it.
    defaultServices!.write(JSON.stringify({ type: 'ADDED', object: service('default', 'web', '10.96.0.50') }) + '\n');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(cache.lookup.serviceByIp('10.96.0.50')?.key, 'default/web');
  } finally {
    await cache.stop();
    await fake.close();
  }
});

test('a cache started again after stop() decides its scope afresh: nothing of the stopped cluster-wide watches serves', async () => {
  let clusterWideAllowed = true;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    const clusterScoped = !url.pathname.includes('/namespaces/') || url.pathname === '/api/v1/namespaces';
    if (clusterScoped && !clusterWideAllowed) return sendStatus(res, 403, 'forbidden at cluster scope');
    if (url.searchParams.get('watch')) return openWatch(res);
    if (url.pathname === '/api/v1/services') return list(res, [service('team-a', 'old', '10.96.1.1')]);
    if (url.pathname === '/api/v1/namespaces') return list(res, [{ metadata: { name: 'default' } }, { metadata: { name: 'team-a' } }]);
    list(res, []);
  });
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'default');
  try {
    await cache.start();
    assert.equal(cache.status().scope, 'cluster');
    assert.equal(cache.lookup.service('team-a', 'old')?.key, 'team-a/old');
    await cache.stop(); // a failed attempt's reset (routes/guest-cluster)
    clusterWideAllowed = false; // the rights were narrowed meanwhile
    await cache.start();
    const status = cache.status();
    assert.equal(status.scope, 'namespaces');
    assert.deepEqual(
      Object.values(status.watches).filter((s) => s === 'stopped'),
      [],
      'no stopped watch is reported as in use',
    );
    assert.equal(cache.lookup.service('team-a', 'old'), undefined, 'nothing listed by the stopped watches');
    assert.equal(cache.namespaceExists('team-a'), undefined, 'the stopped namespace list does not answer');
  } finally {
    await cache.stop();
    await fake.close();
  }
});
