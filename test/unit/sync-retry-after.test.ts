// A first sync the API server slows down with Retry-After (API priority and fairness answering
// a LIST 429): the wait it asks for is not a stall (guest-cluster.ts syncCache), so the start
// goes on instead of failing "got no further syncing".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { syncCache } from '../../src/routes/guest-cluster/guest-cluster.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

test('LIST pages answered 429 with Retry-After longer than the stall bound: the sync waits them out and completes', async (t) => {
  let refusals = 2;
  const fake = await startFakeApi((url, res) => {
    if (url.searchParams.get('sendInitialEvents')) return sendStatus(res, 422, 'watch-list is not enabled');
    if (url.searchParams.get('watch')) return void res.writeHead(200, { 'Content-Type': 'application/json' }).flushHeaders();
    if (url.pathname.endsWith('/endpointslices') && refusals-- > 0) {
      res.writeHead(429, { 'Retry-After': '2', 'Content-Type': 'text/plain; charset=utf-8' });
      return void res.end('Too many requests, please try again later.\n');
    }
    res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [] }));
  });
  const cache = new ClusterCache(fake.api, createLogger('silent'), 'default');
  t.after(async () => {
    await cache.stop();
    await fake.close();
  });
  const t0 = Date.now();
  // Two waits of 2 s each, against a stall bound of 2 s.
  await syncCache(cache, 'http://fake', { stallMs: 2_000 });
  assert.ok(Date.now() - t0 >= 3_800, `both Retry-Afters were waited: ${Date.now() - t0} ms`);
  assert.equal(fake.requests.filter((u) => u.pathname.endsWith('/endpointslices') && !u.searchParams.get('watch')).length, 3);
});
