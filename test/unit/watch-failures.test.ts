// The watch clients against an API server that fails in ways the simulated cluster cannot
// (test/helpers/fake-api.ts): they must stop when told, and not hammer a failing server.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

const within = <T>(p: Promise<T>, ms: number, what: string): Promise<T> =>
  Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms))]);

test('stopping a per-namespace cache while a namespace\'s first list keeps failing: stop() returns, the waiter is told, no request follows', async (t) => {
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (!url.pathname.includes('/namespaces/')) return sendStatus(res, 403, 'not at cluster scope');
    if (url.pathname.includes('/namespaces/other/')) return sendStatus(res, 500, 'etcd unavailable');
    if (url.searchParams.get('watch')) return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
  t.after(() => fake.close());
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'default');
  await cache.start();
  assert.equal(cache.status().scope, 'namespaces');
  const waiting = cache.ensureNamespace('other');
  waiting.catch(() => undefined);
  await new Promise((r) => setTimeout(r, 1200));
  assert.ok(fake.requests.some((u) => u.pathname.includes('/namespaces/other/')), 'its lists were tried');
  await within(cache.stop(), 3000, 'stop()');
  await assert.rejects(within(waiting, 1000, 'ensureNamespace'), /stopped before its first list/);
  const after = fake.requests.length;
  await new Promise((r) => setTimeout(r, 2500));
  assert.equal(fake.requests.length, after, 'nothing is requested after stop()');
});
