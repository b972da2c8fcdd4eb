// routes/guest-cluster/health.ts: when a route that was degraded says it serves again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type http from 'node:http';
import { ApiReachability } from '../../src/cluster/api-reachability.js';
import type { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { RouteHealth } from '../../src/routes/guest-cluster/health.js';
import { eventually } from '../helpers/cluster.js';
import { sendStatus, startFakeApi } from '../helpers/fake-api.js';

test('watches that failed all through an outage keep the route degraded once the API server answers, until they recover', async (t) => {
  // /readyz held, then its connection reset: the server does not answer.
  const held: http.ServerResponse[] = [];
  const fake = await startFakeApi((url, res) => (url.pathname === '/readyz' ? held.push(res) : sendStatus(res, 404, 'not found')));
  t.after(() => fake.close());
  let failing: Array<{ path: string; error: string }> = [{ path: '/api/v1/services', error: 'connect ECONNREFUSED 127.0.0.1:6443' }];
  const lines: Array<{ msg: string }> = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line) as { msg: string }) });
  const health = new RouteHealth('cluster', fake.api, 'https://api.test', { failingWatches: () => failing } as unknown as ClusterCache, log);
  const reach = ApiReachability.of(fake.api);
  reach.suspect();
  await eventually(async () => held.length === 1, 5_000, 10);
  for (const res of held.splice(0)) res.socket?.destroy();
  await eventually(async () => reach.last?.answered === false, 5_000, 10);
  assert.equal(health.check()?.unreachable, true, 'degraded: no answer');
  // The outage lasts; the once-a-second checks go on seeing it.
  await new Promise((r) => setTimeout(r, 1_600));
  assert.equal(health.check()?.unreachable, true);
  // It answers again (a port-forward opened), but the watches are still failing (a 429 while its caches fill).
  reach.sawAnswer();
  failing = [{ path: '/api/v1/services', error: 'storage is (re)initializing' }];
  const degraded = health.check();
  assert.equal(degraded?.unreachable, false, 'streams are not turned away');
  assert.equal(degraded?.reason, 'the watch of services is failing: storage is (re)initializing');
  assert.deepEqual(
    lines.map((l) => l.msg),
    ['cluster route degraded'],
    'no "serving again" while its watches fail',
  );
  failing = [];
  assert.equal(health.check(), undefined);
  assert.deepEqual(
    lines.map((l) => l.msg),
    ['cluster route degraded', 'cluster route serving again'],
  );
});
