// What a route reports besides its state (src/cluster/round-trip.ts, src/routes/route.ts,
// src/cli/status-table.ts): the API round trip, measured on the requests it makes anyway — a
// watch's time to headers counts, a list's does not; the condition a state implies (error is
// down); and the human status line naming a degraded route down when new streams fail at once.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeApi } from '../helpers/fake-api.js';
import { apiGet } from '../../src/cluster/list-watch.js';
import { lastRoundTrip } from '../../src/cluster/round-trip.js';
import { routeCondition } from '../../src/routes/route.js';
import { routeLine } from '../../src/cli/status-table.js';
import { cacheSummary } from '../../src/managed/status.js';

const HEADERS_AFTER_MS = 120;

test('the round trip is the time to a timed request’s headers; an untimed request (a list) leaves it alone', async (t) => {
  const fake = await startFakeApi((url, res) => {
    const delay = url.searchParams.get('delay');
    setTimeout(() => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}'), delay ? Number(delay) : 0);
  });
  t.after(() => fake.close());
  const get = async (path: string, timed: boolean) => (await apiGet(fake.api, path, AbortSignal.timeout(5_000), 5_000, timed)).resume();

  await get(`/api/v1/services?delay=${HEADERS_AFTER_MS * 3}`, false);
  assert.equal(lastRoundTrip(fake.api), undefined, 'a list says nothing of the round trip');

  const before = Date.now();
  await get(`/api/v1/services?watch=1&delay=${HEADERS_AFTER_MS}`, true);
  const first = lastRoundTrip(fake.api);
  assert.ok(first, 'a watch measured it');
  assert.ok(first.ms >= HEADERS_AFTER_MS - 5, `the round trip covers the wait for headers: ${first.ms} ms`);
  assert.ok(first.at >= before);

  await get(`/api/v1/services?delay=${HEADERS_AFTER_MS * 3}`, false);
  assert.deepEqual(lastRoundTrip(fake.api), first, 'still the watch’s figure after another list');
  await get('/readyz', true);
  assert.ok(lastRoundTrip(fake.api)!.ms < first.ms + HEADERS_AFTER_MS * 3, 'each timed request replaces it');
});

test('a condition is the route’s own, else what its state implies', () => {
  assert.equal(routeCondition({ state: 'error' }), 'down');
  assert.equal(routeCondition({ state: 'ready' }), 'ready');
  assert.equal(routeCondition({ state: 'degraded' }), 'degraded');
  assert.equal(routeCondition({ state: 'degraded', condition: 'down' }), 'down');
  assert.equal(routeCondition({ state: 'starting' }), undefined);
  assert.equal(routeCondition({ state: 'syncing' }), undefined);
});

test('the status line: a degraded route that refuses new streams says so, after its reason; no round trip from before it went down', () => {
  const since = new Date().toISOString();
  const line = routeLine({
    name: 'staging',
    kind: 'cluster',
    state: 'degraded',
    condition: 'down',
    since,
    reason: 'the API server https://x does not answer',
    details: { apiRoundTrip: { ms: 12, at: since } },
  });
  assert.match(line, /^route staging \(cluster\); degraded since \d\d:\d\d:\d\d: the API server https:\/\/x does not answer; down: new streams fail at once$/);
  assert.doesNotMatch(routeLine({ name: 'prod', kind: 'cluster', state: 'error', reason: 'x', details: { apiRoundTrip: { ms: 12, at: since } } }), /API/);
  assert.match(routeLine({ name: 'prod', kind: 'cluster', state: 'ready', details: { apiRoundTrip: { ms: 12, at: since } } }), /; API 12 ms$/);
  assert.equal(
    routeLine({ name: 'prod', kind: 'cluster', state: 'degraded', condition: 'degraded', reason: 'a watch fails' }),
    'route prod (cluster); degraded: a watch fails',
  );
});

test('status --json: the cache’s object counts are passed on', () => {
  const summary = cacheSummary({ scope: 'cluster', namespaces: [], watches: { '/api/v1/services': 'synced' }, objects: { services: 3, endpointslices: 4 } });
  assert.deepEqual(summary?.objects, { services: 3, endpointslices: 4 });
});
