// What start-up costs the API server with a few thousand realistic pods (test/sim/realistic.ts),
// counted request by request: a streaming watch-list per kind where the server has it, else LISTs
// paged by 500 and watches resumed from the list's resourceVersion; a continue token that expires
// mid-list (410) starts the list over.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { SimCluster } from '../sim/cluster.js';
import { loadBigCluster, type BigCluster } from '../sim/realistic.js';
import { eventually } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache, ON_DEMAND_LIMITS, type CacheWatchOptions } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';

const PODS = 3000;
const SERVICES = 1200; // + default/kubernetes: 1201 Services and 1201 EndpointSlices, 3 pages each
const NAMESPACES = 20; // + 4 bootstrap namespaces: one page

let sim: SimCluster;
let big: BigCluster;
let dir: string;
let kubeconfig: string;
const caches: ClusterCache[] = [];

before(async () => {
  sim = await SimCluster.start({ quiet: true });
  big = loadBigCluster(sim, { pods: PODS, services: SERVICES, namespaces: NAMESPACES });
  dir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-startup-'));
  kubeconfig = path.join(dir, 'kubeconfig');
  await sim.writeKubeconfig(kubeconfig, { namespace: 'team-0' });
});

after(async () => {
  await Promise.all(caches.map((c) => c.stop()));
  sim.setWatchList(true);
  await sim?.stop();
  await rm(dir, { recursive: true, force: true });
});

/** A cache on a fresh API connection (what a server lacks is remembered per connection). */
async function startCache(options: CacheWatchOptions = {}): Promise<ClusterCache> {
  const { kc } = loadKubeConfig({ kubeconfig });
  const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'team-0', ON_DEMAND_LIMITS, options);
  caches.push(cache);
  sim.resetCounters();
  await cache.start();
  return cache;
}

const pathsOf = (byPath: Record<string, number>) => Object.keys(byPath).sort();

test('a server with watch-list: one streaming watch per kind, no LIST; pods are not watched', async () => {
  const cache = await startCache();
  const c = sim.counters;
  assert.equal(c.list, 0, `no LIST: ${JSON.stringify(c.byPath)}`);
  assert.equal(c.watchList, 3, 'Services, EndpointSlices, Namespaces');
  assert.equal(c.total, 3);
  assert.deepEqual(pathsOf(c.byPath), ['/api/v1/namespaces', '/api/v1/services', '/apis/discovery.k8s.io/v1/endpointslices']);
  const svc = big.services[17]!;
  assert.equal(cache.lookup.service(svc.namespace, svc.name)?.clusterIPs[0], svc.clusterIP);
  assert.ok(cache.knowsIp(svc.podIPs[0]!), 'a pod behind a Service is known from its EndpointSlice');
  assert.equal(cache.lookup.slicesFor(svc.namespace, svc.name)[0]?.endpoints.length, svc.podIPs.length);
});

test('a server without watch-list: LISTs paged by 500, then watches from the list resourceVersion', async () => {
  sim.setWatchList(false);
  try {
    const cache = await startCache();
    const c = sim.counters;
    assert.ok(c.watchList >= 1 && c.watchList <= 3, `watch-list tried and refused (422): ${c.watchList}`);
    assert.equal(c.list, 3 + 3 + 1, `pages: ${JSON.stringify(c.byPath)}`);
    assert.equal(c.continued, 2 + 2, 'Services and EndpointSlices took two continue requests each');
    // The watches start from the lists' resourceVersion: new objects arrive without another list.
    await eventually(async () => sim.counters.watch - sim.counters.watchList === 3, 5_000, 20);
    await sim.createService({ namespace: 'team-3', name: 'late', selector: { app: 'late' }, ports: [{ port: 80 }] });
    await eventually(async () => !!cache.lookup.service('team-3', 'late'), 5_000, 20);
    assert.equal(sim.counters.list, 7, 'no relist');
  } finally {
    sim.setWatchList(true);
  }
});

test('with the pod watch (watchPods): 3,000 running pods in 6 pages of 500', async () => {
  sim.setWatchList(false);
  try {
    await startCache({ watchPods: true });
    const pods = Object.entries(sim.counters.byPath).find(([p]) => p === '/api/v1/pods');
    assert.ok(pods, 'pods listed');
    assert.equal(sim.counters.list, 3 + 3 + 1 + 6);
    assert.equal(sim.counters.continued, 2 + 2 + 5);
  } finally {
    sim.setWatchList(true);
  }
});

test('a continue token that expires in the middle of a list (410) starts that list over', async () => {
  sim.setWatchList(false);
  let expired = false;
  sim.onListPage((resource) => {
    if (resource !== 'services' || expired) return;
    expired = true;
    // A change after the first page, then etcd compaction: the page's snapshot is gone.
    void sim.createService({ namespace: 'team-4', name: 'mid-list', selector: { app: 'x' }, ports: [{ port: 80 }] }).then(() => sim.compact());
  });
  try {
    const cache = await startCache();
    assert.ok(expired);
    assert.ok(cache.lookup.service('team-4', 'mid-list'), 'the list started over sees the new Service');
    assert.ok(cache.lookup.service(big.services[SERVICES - 1]!.namespace, big.services[SERVICES - 1]!.name), 'and the last page');
    assert.ok(sim.counters.byPath['/api/v1/services']! >= 4, `services listed again: ${JSON.stringify(sim.counters.byPath)}`);
  } finally {
    sim.onListPage(undefined);
    sim.setWatchList(true);
  }
});

test('while the first sync runs, status() says per kind how many objects are listed, of how many', async () => {
  sim.setWatchList(false);
  try {
    const { kc } = loadKubeConfig({ kubeconfig });
    const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'team-0', ON_DEMAND_LIMITS, { watchPods: true });
    caches.push(cache);
    const seen: string[] = [];
    let done = false;
    const polling = (async () => {
      while (!done) {
        const s = cache.status();
        for (const [kind, p] of Object.entries(s.syncing ?? {})) seen.push(`${kind} ${p.listed}/${p.total ?? '?'}`);
        await new Promise((r) => setImmediate(r));
      }
    })();
    await cache.start();
    done = true;
    await polling;
    // Earlier tests added a Service or two: at least SERVICES + default/kubernetes in all.
    const services = seen.map((l) => /^services 500\/(\d+)$/.exec(l)).find(Boolean);
    assert.ok(services && Number(services[1]) > SERVICES, `progress seen: ${[...new Set(seen)].join(', ')}`);
    assert.ok(
      seen.some((l) => /^pods (500|1000|1500|2000|2500)\/\?$/.test(l)),
      'pods are listed with a field selector: no total from the server',
    );
    assert.equal(cache.status().syncing, undefined, 'nothing left syncing');
  } finally {
    sim.setWatchList(true);
  }
});

test('a first sync that takes a while logs per kind what is listed (of how many), then the counts', async () => {
  sim.setWatchList(false);
  try {
    const { kc } = loadKubeConfig({ kubeconfig });
    const lines: Array<Record<string, any>> = [];
    const log = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l)) } as never);
    const cache = new ClusterCache(new ApiConnection(kc), log, 'team-0', ON_DEMAND_LIMITS, { watchPods: true, progressIntervalMs: 20 });
    caches.push(cache);
    await cache.start();
    const progress = lines.filter((l) => l.msg === 'syncing the cluster cache');
    assert.ok(
      progress.some((l) => l.kind === 'pods' && l.listed > 0 && l.of === undefined),
      `pod progress lines: ${JSON.stringify(progress.slice(0, 5))}`,
    );
    assert.ok(
      progress.some((l) => l.kind === 'services' && l.listed > 0 && l.of > SERVICES),
      'services: listed of the total (remainingItemCount)',
    );
    const synced = lines.find((l) => l.msg === 'cluster cache synced');
    assert.equal(synced?.pods, PODS);
    assert.ok(synced?.services > SERVICES && synced?.endpointslices > SERVICES);
  } finally {
    sim.setWatchList(true);
  }
});
