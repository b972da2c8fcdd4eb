// On-demand namespace watches under namespace-scoped RBAC: bounded in number, in how fast new ones
// may be looked up (allowed or forbidden, every new name costs budget), idle or never-served ones
// make room, and a namespace RBAC refused is not asked again for a while. ClusterCache (and the
// Resolver on top) in-process against the simulated API server (real HTTP, real client-node
// informers), whose request counters show what reached it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache, ON_DEMAND_LIMITS, type OnDemandLimits } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { OverloadedError, replyFor } from '../../src/core/errors.js';
import { Resolver } from '../../src/routes/cluster/resolver.js';

let cluster: TestCluster;
let cache: ClusterCache;
/** Requests that list objects: LISTs, and watch-lists (watches asking for the initial events). */
const listings = () => cluster.sim.counters.list + cluster.sim.counters.watchList;
const caches: ClusterCache[] = [];
/** Budget high enough not to matter where a test is about something else. */
const UNLIMITED = { lookupsPerSecond: 1e6, lookupBurst: 1e6 };

/** A cache for a token that may read only `namespaces` (never cluster-wide, never the namespace list). */
async function scopedCache(name: string, namespaces: string[], limits: Partial<OnDemandLimits>, lines?: string[]): Promise<ClusterCache> {
  const token = cluster.sim.issueToken({ namespaces });
  const file = path.join(cluster.dir, `kc-${name}`);
  await writeFile(file, cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), { mode: 0o600 });
  const { kc } = loadKubeConfig({ kubeconfig: file });
  const log = lines ? createLogger('info', { write: (l: string) => void lines.push(l) }) : createLogger('silent');
  const c = new ClusterCache(new ApiConnection(kc), log, 'shop', { ...ON_DEMAND_LIMITS, ...limits });
  caches.push(c);
  await c.start();
  return c;
}

before(async () => {
  cluster = await startTestCluster();
  cache = await scopedCache('scoped', ['shop', 'data', 'ns-a', 'ns-b'], { maxNamespaces: 3, evictIdleMs: 300, forbiddenTtlMs: 1_000, ...UNLIMITED });
});

after(async () => {
  await Promise.all(caches.map((c) => c.stop()));
  await cluster?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('at the limit namespaces in use refuse a new one; an idle one makes room (never the default)', async () => {
  assert.equal(cache.status().scope, 'namespaces');
  await cache.ensureNamespace('data');
  cache.noteServed('data');
  await cache.ensureNamespace('ns-a');
  cache.noteServed('ns-a');
  assert.deepEqual(cache.status().namespaces.sort(), ['data', 'ns-a', 'shop']);
  await assert.rejects(cache.ensureNamespace('ns-b'), (err: unknown) => err instanceof OverloadedError && /already watching 3 namespaces/.test(err.message));
  await sleep(150);
  await cache.ensureNamespace('ns-a'); // used again: now 'data' is the one idle longest
  await sleep(200);
  await cache.ensureNamespace('ns-b');
  assert.deepEqual(cache.status().namespaces.sort(), ['ns-a', 'ns-b', 'shop']);
  assert.ok(cache.lookup.service('shop', 'web'), 'the default namespace stays watched');
  assert.equal(cache.lookup.service('data', 'echo'), undefined, 'the evicted namespace is gone from the index');
  await sleep(350);
  await cache.ensureNamespace('data'); // ns-b never served a stream: it makes room first; data is watched afresh
  assert.deepEqual(cache.status().namespaces.sort(), ['data', 'ns-a', 'shop']);
  assert.ok(cache.lookup.service('data', 'echo'));
});

test('a namespace RBAC forbids is refused from memory for a while, then asked again', async () => {
  // 'data' has not served since it came back, so the forbidden one gets as far as the API server.
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  cluster.sim.resetCounters();
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  assert.equal(cluster.sim.counters.total, 0, `no API request: ${JSON.stringify(cluster.sim.counters.byPath)}`);
  await sleep(1_100);
  await sleep(350);
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  assert.ok(cluster.sim.counters.total > 0, 'asked again after the TTL');
});

test('200 distinct namespace names (readable or forbidden) cost LISTs within the look-up budget, and one log line', async () => {
  const readable = Array.from({ length: 100 }, (_, i) => `open-${i}`);
  const forbidden = Array.from({ length: 100 }, (_, i) => `closed-${i}`);
  const lines: string[] = [];
  const budget = { lookupsPerSecond: 2, lookupBurst: 8 };
  const c = await scopedCache('budget', ['shop', ...readable], { ...budget, maxNamespaces: 500 }, lines);
  cluster.sim.resetCounters();
  const started = Date.now();
  const names = readable.flatMap((r, i) => [r, forbidden[i]!]);
  const results = await Promise.allSettled(names.map((ns) => c.ensureNamespace(ns)));
  const elapsedS = (Date.now() - started) / 1000;
  const lookups = Math.floor(budget.lookupBurst + budget.lookupsPerSecond * elapsedS);
  const lists = listings();
  // Each look-up lists Services and EndpointSlices once (a LIST, or a watch-list where the server streams it).
  assert.ok(lists <= 2 * lookups, `${lists} LISTs for ${names.length} names in ${elapsedS} s; the budget allows ${lookups} look-ups`);
  assert.ok(lists >= 3, 'the burst was used');
  const overBudget = results.filter((r) => r.status === 'rejected' && r.reason instanceof OverloadedError);
  assert.ok(overBudget.length >= names.length - lookups, `${overBudget.length} refused for the budget`);
  const reply = replyFor((overBudget[0] as PromiseRejectedResult).reason);
  assert.equal(reply.socks, 0x01);
  assert.equal(reply.http, 503);
  assert.match(reply.message, /too many new namespaces/);
  const warnings = lines.filter((l) => /look-up budget/.test(l));
  assert.equal(warnings.length, 1, `one rate-limited line: ${warnings.join('')}`);
  assert.equal(JSON.parse(warnings[0]!).refused, 1, 'the line counts the refusals since the last one');
  // Names refused for the budget are not remembered as forbidden: asked again later, they are looked up.
  await sleep(600);
  cluster.sim.resetCounters();
  await assert.rejects(c.ensureNamespace('closed-99'), /forbidden|403/i);
  assert.ok(listings() > 0);
});

test('64 slots full of readable namespaces no stream reached a pod in: a Service in a 65th namespace is still reachable', async () => {
  const unused = Array.from({ length: 63 }, (_, i) => `unused-${i}`);
  for (const ns of unused) await cluster.sim.createNamespace(ns);
  await cluster.sim.createPod({ namespace: 'real', name: 'api-0', labels: { app: 'api' }, ports: [{ containerPort: 8080, backend: 'http' }] });
  await cluster.sim.createService({ namespace: 'real', name: 'api', selector: { app: 'api' }, ports: [{ port: 80, targetPort: 8080 }] });
  const c = await scopedCache('slots', ['shop', 'real', 'later', ...unused], UNLIMITED);
  const resolver = new Resolver(c, 'cluster.local');
  for (const ns of unused) {
    await assert.rejects(resolver.resolve({ host: `nothing.${ns}.svc.cluster.local`, port: 80, type: 'domain' }), /no Service "nothing"/);
  }
  assert.equal(c.status().namespaces.length, ON_DEMAND_LIMITS.maxNamespaces, 'every slot is taken');
  const plan = await resolver.resolve({ host: 'api.real.svc.cluster.local', port: 80, type: 'domain' });
  assert.deepEqual(
    plan.candidates.map((p) => [p.namespace, p.pod, p.port]),
    [['real', 'api-0', 8080]],
  );
  assert.equal(c.status().namespaces.length, ON_DEMAND_LIMITS.maxNamespaces);
  // 'real' served a stream: the next newcomer takes another never-served slot, not this one.
  await c.ensureNamespace('later');
  assert.ok(c.status().namespaces.includes('real'));
  assert.ok(c.lookup.service('real', 'api'));
});

test('a namespace watched for a request that never reached a pod is released soon; one that did is kept', async () => {
  const c = await scopedCache('release', ['shop', 'data', 'ns-a'], { ...UNLIMITED, unservedReleaseMs: 300 });
  const resolver = new Resolver(c, 'cluster.local');
  await resolver.resolve({ host: 'echo.data.svc.cluster.local', port: 7000, type: 'domain' });
  await assert.rejects(resolver.resolve({ host: 'nothing.ns-a.svc.cluster.local', port: 80, type: 'domain' }), /no Service/);
  assert.deepEqual(c.status().namespaces.sort(), ['data', 'ns-a', 'shop']);
  await sleep(700);
  assert.deepEqual(c.status().namespaces.sort(), ['data', 'shop']);
});

test('without cluster-wide permission, a Pod IP behind a Service of a watched namespace is looked up in that namespace', async () => {
  const c = await scopedCache('pod-ip', ['shop', 'data'], UNLIMITED);
  await c.ensureNamespace('data');
  const echo = 'echo-6b8f9d7c5-r2lsm';
  const ip = cluster.sim.podIP('data', echo);
  assert.ok(c.knowsIp(ip), 'known from the EndpointSlice of data/echo');
  cluster.sim.resetCounters();
  assert.equal((await c.findPodByIp(ip))?.name, echo);
  assert.deepEqual(
    Object.keys(cluster.sim.counters.byPath),
    ['/api/v1/namespaces/data/pods'],
    'one look-up, in "data" (not the default "shop", nor cluster-wide: forbidden)',
  );
});

test('namespaces that refuse us once watched (deleted with their RoleBinding) stop being watched, round after round', async () => {
  const rounds = 5;
  const perRound = 20;
  const token = cluster.sim.issueToken({ namespaces: ['shop'] });
  const file = path.join(cluster.dir, 'kc-revoked');
  await writeFile(file, cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), { mode: 0o600 });
  const { kc } = loadKubeConfig({ kubeconfig: file });
  const c = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'shop', { ...ON_DEMAND_LIMITS, ...UNLIMITED, revokedReleaseMs: 300 });
  caches.push(c);
  await c.start();
  for (let round = 0; round < rounds; round++) {
    const names = Array.from({ length: perRound }, (_, i) => `gone-${round}-${i}`);
    for (const ns of names) await cluster.sim.createNamespace(ns);
    cluster.sim.scopeToken(token, ['shop', ...names]);
    for (const ns of names) {
      await c.ensureNamespace(ns);
      c.noteServed(ns);
    }
    assert.equal(c.status().namespaces.length, perRound + 1);
    // The namespaces are deleted, their RoleBindings with them: each watch renewed is refused.
    cluster.sim.scopeToken(token, ['shop']);
    cluster.sim.dropWatches();
    const deadline = Date.now() + 10_000;
    while (c.status().namespaces.length > 1 && Date.now() < deadline) await sleep(50);
    assert.deepEqual(c.status().namespaces, ['shop'], `round ${round}: only the context's namespace is watched`);
    assert.deepEqual(c.failingWatches(), [], `round ${round}: no watch left retrying`);
  }
  assert.ok(c.lookup.service('shop', 'web'), "the context's namespace is still served");
});

test('a namespace refusing us does not make the route degraded, and one refused only a moment (RBAC loading after a restart) stays watched', async () => {
  const token = cluster.sim.issueToken({ namespaces: ['shop', 'data'] });
  const file = path.join(cluster.dir, 'kc-blip');
  await writeFile(file, cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), { mode: 0o600 });
  const { kc } = loadKubeConfig({ kubeconfig: file });
  const c = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'shop', { ...ON_DEMAND_LIMITS, ...UNLIMITED, revokedReleaseMs: 60_000 });
  caches.push(c);
  await c.start();
  await c.ensureNamespace('data');
  c.noteServed('data');
  cluster.sim.scopeToken(token, ['shop']);
  cluster.sim.dropWatches();
  const watches = () => c.status().watches;
  const deadline = Date.now() + 10_000;
  while (watches()['/api/v1/namespaces/data/services'] !== 'retrying' && Date.now() < deadline) await sleep(20);
  assert.equal(watches()['/api/v1/namespaces/data/services'], 'retrying', 'the refusal was seen');
  await sleep(100);
  assert.deepEqual(c.failingWatches(), [], "a namespace besides the context's refusing us does not make the route degraded");
  cluster.sim.scopeToken(token, ['shop', 'data']);
  while (Object.values(watches()).some((w) => w !== 'synced') && Date.now() < deadline + 5_000) await sleep(50);
  assert.deepEqual(Object.values(watches()), ['synced', 'synced', 'synced', 'synced']);
  assert.deepEqual(c.status().namespaces.sort(), ['data', 'shop']);
  assert.ok(c.lookup.service('data', 'echo'));
});

test('namespaces that served streams and are named no more stop being watched below the limit, round after round', async () => {
  const names = ['data', 'ns-a', 'ns-b'];
  const c = await scopedCache('idle', ['shop', ...names], { ...UNLIMITED, idleReleaseMs: 300 });
  for (let round = 0; round < 5; round++) {
    for (const ns of names) {
      await c.ensureNamespace(ns);
      c.noteServed(ns);
    }
    assert.deepEqual(c.status().namespaces.sort(), ['data', 'ns-a', 'ns-b', 'shop']);
    // One of them stays in use: named again while the others idle.
    const deadline = Date.now() + 5_000;
    while (c.status().namespaces.length > 2 && Date.now() < deadline) {
      await c.ensureNamespace('data');
      await sleep(50);
    }
    assert.deepEqual(c.status().namespaces.sort(), ['data', 'shop'], `round ${round}: what is used now, and the context's namespace`);
    while (c.status().namespaces.length > 1 && Date.now() < deadline + 5_000) await sleep(50);
    assert.deepEqual(c.status().namespaces, ['shop'], `round ${round}: the context's namespace is never dropped`);
  }
  assert.ok(c.lookup.service('shop', 'web'));
});
