// On-demand namespace watches under namespace-scoped RBAC: bounded in number, idle ones make room,
// and a namespace RBAC refused is not asked again for a while. ClusterCache in-process against the
// simulated API server (real HTTP, real client-node informers).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { OverloadedError } from '../../src/core/errors.js';

let cluster: TestCluster;
let cache: ClusterCache;

before(async () => {
  cluster = await startTestCluster();
  const token = cluster.sim.issueToken({ namespaces: ['shop', 'data', 'ns-a', 'ns-b'] });
  const file = path.join(cluster.dir, 'kc-scoped');
  await writeFile(file, cluster.sim.kubeconfigYaml({ token, namespace: 'shop' }), { mode: 0o600 });
  const { kc } = loadKubeConfig({ kubeconfig: file });
  cache = new ClusterCache(kc, new ApiConnection(kc), createLogger('silent'), 'shop', { maxNamespaces: 3, evictIdleMs: 300, forbiddenTtlMs: 1_000 });
  await cache.start();
});

after(async () => {
  await cache?.stop();
  await cluster?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('at the limit a busy set of namespaces refuses a new one; an idle one makes room (never the default)', async () => {
  assert.equal(cache.status().scope, 'namespaces');
  await cache.ensureNamespace('data');
  await cache.ensureNamespace('ns-a');
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
  await cache.ensureNamespace('data'); // evicts the idlest again; data is watched afresh
  assert.ok(cache.lookup.service('data', 'echo'));
});

test('a namespace RBAC forbids is refused from memory for a while, then asked again', async () => {
  await sleep(350); // let one namespace go idle so the forbidden one gets that far
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  cluster.sim.resetCounters();
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  assert.equal(cluster.sim.counters.total, 0, `no API request: ${JSON.stringify(cluster.sim.counters.byPath)}`);
  await sleep(1_100);
  await sleep(350);
  await assert.rejects(cache.ensureNamespace('kube-system'), /forbidden|403/i);
  assert.ok(cluster.sim.counters.total > 0, 'asked again after the TTL');
});
