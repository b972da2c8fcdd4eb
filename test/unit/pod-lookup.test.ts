// On-demand Pod IP look-ups (cluster/pod-lookup.ts through ClusterCache) against a stand-in API
// server, where the simulated cluster cannot go: a dual-stack pod's second address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterCache } from '../../src/cluster/cache.js';
import { closeAgents } from '../../src/cluster/list-watch.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';
import { POD_LOOKUP_LIMITS } from '../../src/cluster/pod-lookup.js';
import { NotAllowedError } from '../../src/core/errors.js';

const POD = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { namespace: 'shop', name: 'web-1', uid: 'u-web-1', resourceVersion: '5' },
  spec: { containers: [{ name: 'web', ports: [{ containerPort: 8080 }] }] },
  // status.podIP is the first of podIPs: the field selector matches only that one.
  status: { phase: 'Running', podIP: '10.244.0.5', podIPs: [{ ip: '10.244.0.5' }, { ip: 'fd00:10:244::5' }] },
};
const SLICE = {
  metadata: { namespace: 'shop', name: 'web-v6', resourceVersion: '6', labels: { 'kubernetes.io/service-name': 'web' } },
  addressType: 'IPv6',
  ports: [{ name: '', port: 8080, protocol: 'TCP' }],
  endpoints: [{ addresses: ['fd00:10:244::5'], conditions: { ready: true }, targetRef: { kind: 'Pod', namespace: 'shop', name: 'web-1', uid: 'u-web-1' } }],
};

test("a dual-stack pod's second IP (not status.podIP) is found through the endpoint that lists it", async (t) => {
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    const list = (items: unknown[]) =>
      res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items }));
    if (url.pathname === '/api/v1/namespaces/shop/pods/web-1') return void res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify(POD));
    if (url.pathname.endsWith('/pods')) {
      const selector = url.searchParams.get('fieldSelector') ?? '';
      return list(selector.includes('status.podIP=10.244.0.5') ? [POD] : []);
    }
    if (url.pathname === '/api/v1/namespaces') return list([{ metadata: { name: 'shop', resourceVersion: '1' } }]);
    if (url.pathname.endsWith('/endpointslices')) return list([SLICE]);
    list([]);
  });
  t.after(() => fake.close());
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'shop');
  await cache.start();
  t.after(async () => {
    await cache.stop();
    closeAgents(fake.api);
  });
  assert.equal((await cache.findPodByIp('10.244.0.5'))?.name, 'web-1', 'the first IP, by the field selector');
  const second = await cache.findPodByIp('fd00:10:244:0::5');
  assert.equal(second?.name, 'web-1', 'the second IP, through its endpoint');
  assert.equal(await cache.findPodByIp('fd00:10:244::6'), undefined, 'an IP no endpoint lists stays unknown');
});

test('a look-up RBAC refuses is refused from memory a while, naming the right and the kubectl line, not asked again per connection', async (t) => {
  const forbidden = 'pods is forbidden: User "dev" cannot list resource "pods" in API group "" in the namespace "shop"';
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    if (url.pathname.endsWith('/pods')) return sendStatus(res, 403, forbidden);
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
  t.after(() => fake.close());
  const limits = { ...POD_LOOKUP_LIMITS, missingTtlMs: 300 };
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'shop', undefined, { podLookup: limits });
  await cache.start();
  t.after(async () => {
    await cache.stop();
    closeAgents(fake.api);
  });
  const podLists = () => fake.requests.filter((u) => u.pathname.endsWith('/pods')).length;
  for (const ip of ['10.244.0.5', '10.244.0.5', '10.244.0.6', '10.244.0.7']) {
    await assert.rejects(cache.findPodByIp(ip, 'shop'), (err: unknown) => {
      assert.ok(err instanceof NotAllowedError, String(err));
      assert.equal(err.message, `${forbidden}; the proxy needs list on pods to find a Pod IP in namespace shop (check: kubectl auth can-i list pods -n shop)`);
      return true;
    });
  }
  assert.equal(podLists(), 1, 'one 403 answers every Pod IP of the namespace while it is kept');
  await new Promise((resolve) => setTimeout(resolve, 350));
  await assert.rejects(cache.findPodByIp('10.244.0.5', 'shop'), NotAllowedError);
  assert.equal(podLists(), 2, 'asked again once the refusal is old: a RoleBinding granted meanwhile is seen');
});
