// routes/guest-cluster/guest-cluster.ts syncCache and cluster/sync-progress.ts SyncHeadway: a first
// sync fails when it gets nowhere, not when it merely takes long.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StartupError } from '../../src/core/errors.js';
import type { ClusterCache } from '../../src/cluster/cache.js';
import type { CacheStatus } from '../../src/cluster/cache-status.js';
import { SyncHeadway } from '../../src/cluster/sync-progress.js';
import { syncCache } from '../../src/routes/guest-cluster/guest-cluster.js';

/** A cache whose first sync the test drives: `listed` per kind, `synced` watches, `done()` ends it. */
function drivenCache() {
  let finish!: () => void;
  const started = new Promise<void>((resolve) => (finish = resolve));
  const state = { listed: { services: 0, endpointslices: 0 } as Record<string, number>, synced: 0 };
  const cache = {
    defaultNamespace: 'default',
    start: () => started,
    status: (): CacheStatus => ({
      scope: 'cluster',
      namespaces: [],
      watches: {
        '/api/v1/services': state.synced > 0 ? 'synced' : 'starting',
        '/apis/discovery.k8s.io/v1/endpointslices': state.synced > 1 ? 'synced' : 'starting',
      },
      syncing: Object.fromEntries(Object.entries(state.listed).map(([kind, listed]) => [kind, { listed, total: 5000 }])),
    }),
  };
  return { cache: cache as unknown as ClusterCache, state, done: () => finish() };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a sync that keeps getting further is waited for, however long it takes', { timeout: 10_000 }, async () => {
  const { cache, state, done } = drivenCache();
  const sync = syncCache(cache, 'https://big.example', { stallMs: 300 });
  // Four times the stall limit, one page at a time.
  for (let i = 0; i < 24; i++) {
    await sleep(50);
    state.listed.services += 100;
  }
  state.synced = 1;
  delete state.listed.services;
  for (let i = 0; i < 6; i++) {
    await sleep(50);
    state.listed.endpointslices += 100;
  }
  done();
  await sync;
});

test('a sync that gets no further fails after the stall limit, saying where it stands', { timeout: 10_000 }, async () => {
  const { cache, state } = drivenCache();
  const began = Date.now();
  const sync = syncCache(cache, 'https://big.example', { stallMs: 300 });
  for (let i = 0; i < 4; i++) {
    await sleep(50);
    state.listed.services += 100;
  }
  // Stuck from here on (a page that never comes, a list failing and retried).
  await assert.rejects(
    sync,
    (err: Error) =>
      err instanceof StartupError &&
      /got no further syncing from https:\/\/big\.example for 0\.3 s/.test(err.message) &&
      /services: 400 of 5000 listed; endpointslices: 0 of 5000 listed/.test(err.message),
  );
  assert.ok(Date.now() - began >= 500, 'not before the stall limit after the last headway');
});

test('a sync that gets nowhere from the start (no page ever comes) fails after the stall limit', { timeout: 10_000 }, async () => {
  const { cache } = drivenCache();
  await assert.rejects(
    syncCache(cache, 'https://stuck.example', { stallMs: 300 }),
    /got no further syncing from https:\/\/stuck\.example for 0\.3 s \(services: 0 of 5000 listed/,
  );
  const headway = new SyncHeadway();
  const nothing = { watches: { services: 'starting' }, syncing: { services: { listed: 0 } } };
  assert.equal(headway.moved(nothing), true, 'the first look counts');
  assert.equal(headway.moved(nothing), false, 'nothing listed yet is no headway');
});

test('a list that starts over moves again only once it passes where it got before', () => {
  const headway = new SyncHeadway();
  const at = (services: number, synced = 0) => ({
    watches: { services: synced > 0 ? 'synced' : 'retrying', slices: 'starting' },
    syncing: { services: { listed: services } },
  });
  assert.equal(headway.moved(at(0)), true, 'the first look counts');
  assert.equal(headway.moved(at(500)), true);
  assert.equal(headway.moved(at(500)), false, 'the same place');
  assert.equal(headway.moved(at(0)), false, 'started over');
  assert.equal(headway.moved(at(400)), false, 'not yet where it was');
  assert.equal(headway.moved(at(501)), true, 'further than before');
  assert.equal(headway.moved(at(501, 1)), true, 'a watch synced');
  assert.equal(headway.moved(at(501, 0)), false, 'one falling back does not count');
  assert.equal(headway.moved(at(501, 1)), false, 'nor does it syncing again');
});
