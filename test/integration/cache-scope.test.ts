// What the watch cache keeps. By default no pods at all: a Pod IP is looked up when a request
// names it (running pods only: fieldSelector status.phase=Running), the answer kept a few seconds.
// With the pod watch (watchPods, what the bench compares) only running pods, so finished Job pods
// cost no memory, and a pod that finishes leaves the cache through the watch.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache, ON_DEMAND_LIMITS } from '../../src/cluster/cache.js';
import { POD_LOOKUP_LIMITS } from '../../src/cluster/pod-lookup.js';
import { createLogger } from '../../src/core/log.js';
import { replyFor } from '../../src/core/errors.js';
import { SAMPLE } from '../sim/sample.js';

const SAMPLE_WEB = SAMPLE.web.pods[0]!;

let cluster: TestCluster;
const caches: ClusterCache[] = [];

async function startCache(watchPods: boolean): Promise<ClusterCache> {
  const { kc } = loadKubeConfig({ kubeconfig: cluster.kubeconfig });
  const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'shop', ON_DEMAND_LIMITS, {
    watchPods,
    podLookup: { ...POD_LOOKUP_LIMITS, foundTtlMs: 300, missingTtlMs: 300 },
  });
  caches.push(cache);
  await cache.start();
  return cache;
}

before(async () => {
  cluster = await startTestCluster();
  await cluster.sim.createPod({ namespace: 'batch', name: 'job-done', labels: { job: 'x' }, ports: [] });
  await cluster.sim.completePod('batch', 'job-done');
  await cluster.sim.createPod({ namespace: 'batch', name: 'job-running', labels: { job: 'x' }, ports: [{ containerPort: 8080 }] });
  await cluster.sim.createPod({ namespace: 'batch', name: 'job-later', labels: { job: 'x' }, ports: [{ containerPort: 8080 }] });
});

after(async () => {
  await Promise.all(caches.map((c) => c.stop()));
  await cluster?.close();
});

test('watched pods: finished pods are not kept; a running pod that finishes leaves the cache', async () => {
  const cache = await startCache(true);
  assert.equal(cache.status().scope, 'cluster');
  assert.ok(
    Object.keys(cache.status().watches).some((p) => p.includes('/pods')),
    'pods are watched',
  );
  assert.equal(cache.lookup.pod('batch', 'job-done'), undefined, 'a Succeeded pod is not listed');
  const ip = cluster.sim.podIP('batch', 'job-running');
  assert.equal(cache.lookup.podByIp(ip)?.name, 'job-running');
  await cluster.sim.completePod('batch', 'job-running');
  await eventually(async () => cache.lookup.pod('batch', 'job-running') === undefined, 5_000, 20);
  assert.equal(cache.lookup.podByIp(ip), undefined);
  assert.ok(cache.lookup.pod('shop', SAMPLE_WEB), 'running pods stay');
});

test('pods not watched: a Pod IP is looked up once, kept briefly, and a finished pod is not found', async () => {
  const cache = await startCache(false);
  assert.ok(!Object.keys(cache.status().watches).some((p) => p.includes('/pods')), 'no pod watch');
  const ip = cluster.sim.podIP('batch', 'job-later');
  assert.equal(cache.knowsIp(ip), false, 'a pod behind no Service is unknown until looked up');
  cluster.sim.resetCounters();
  assert.equal((await cache.findPodByIp(ip))?.name, 'job-later');
  assert.equal((await cache.findPodByIp(ip))?.name, 'job-later', 'the second ask is answered from memory');
  assert.equal(cluster.sim.counters.list, 1, `one look-up: ${JSON.stringify(cluster.sim.counters.byPath)}`);
  assert.equal(cache.knowsIp(ip), true);
  await cluster.sim.completePod('batch', 'job-later');
  await eventually(async () => (await cache.findPodByIp(ip)) === undefined, 5_000, 100);
  assert.equal(await cache.findPodByIp(cluster.sim.podIP('batch', 'job-done')), undefined, 'a Succeeded pod is not dialled');
  assert.ok(cache.knowsIp(cluster.sim.podIP('shop', SAMPLE_WEB)), 'a pod behind a Service is known from its EndpointSlice');
});

test('unknown Pod IPs named in a burst cost look-ups only within the budget; the rest are refused (0x01 / 503) without an API request', async () => {
  const { kc } = loadKubeConfig({ kubeconfig: cluster.kubeconfig });
  const limits = { ...POD_LOOKUP_LIMITS, lookupsPerSecond: 2, lookupBurst: 5 };
  const cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'shop', ON_DEMAND_LIMITS, { podLookup: limits });
  caches.push(cache);
  await cache.start();
  cluster.sim.resetCounters();
  const started = Date.now();
  const ips = Array.from({ length: 50 }, (_, i) => `10.99.${i >> 8}.${i & 255}`);
  const results = await Promise.allSettled(ips.map((ip) => cache.findPodByIp(ip)));
  const allowed = Math.floor(limits.lookupBurst + (limits.lookupsPerSecond * (Date.now() - started)) / 1000);
  const c = cluster.sim.counters;
  assert.ok(c.list <= allowed && c.list >= limits.lookupBurst, `${c.list} look-ups; the budget allows ${allowed}`);
  const refused = results.filter((r) => r.status === 'rejected');
  assert.equal(refused.length, ips.length - c.list);
  const reply = replyFor((refused[0] as PromiseRejectedResult).reason);
  assert.deepEqual([reply.socks, reply.http], [0x01, 503]);
  // Asked again at once: the answers ("no such pod") come from memory, no new look-up.
  const answered = ips.filter((_, i) => results[i]!.status === 'fulfilled');
  await Promise.all(answered.map((ip) => cache.findPodByIp(ip)));
  assert.equal(cluster.sim.counters.list, c.list, 'negative answers are kept');
});
