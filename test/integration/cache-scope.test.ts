// What the watch cache keeps: running pods only (field selector status.phase=Running), so finished
// Job pods cost no memory; a pod that finishes leaves the cache through the watch.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { startTestCluster, eventually, type TestCluster } from '../helpers/cluster.js';
import { loadKubeConfig } from '../../src/cluster/kubeconfig.js';
import { ApiConnection } from '../../src/cluster/api.js';
import { ClusterCache } from '../../src/cluster/cache.js';
import { createLogger } from '../../src/core/log.js';
import { SAMPLE } from '../sim/sample.js';

const SAMPLE_WEB = SAMPLE.web.pods[0]!;

let cluster: TestCluster;
let cache: ClusterCache;

before(async () => {
  cluster = await startTestCluster();
  await cluster.sim.createPod({ namespace: 'batch', name: 'job-done', labels: { job: 'x' }, ports: [] });
  await cluster.sim.completePod('batch', 'job-done');
  await cluster.sim.createPod({ namespace: 'batch', name: 'job-running', labels: { job: 'x' }, ports: [{ containerPort: 8080 }] });
  const { kc } = loadKubeConfig({ kubeconfig: cluster.kubeconfig });
  cache = new ClusterCache(new ApiConnection(kc), createLogger('silent'), 'shop');
  await cache.start();
});

after(async () => {
  await cache?.stop();
  await cluster?.close();
});

test('finished pods are not kept; a running pod that finishes leaves the cache', async () => {
  assert.equal(cache.status().scope, 'cluster');
  assert.equal(cache.lookup.pod('batch', 'job-done'), undefined, 'a Succeeded pod is not listed');
  const ip = cluster.sim.podIP('batch', 'job-running');
  assert.equal(cache.lookup.podByIp(ip)?.name, 'job-running');
  await cluster.sim.completePod('batch', 'job-running');
  await eventually(async () => cache.lookup.pod('batch', 'job-running') === undefined, 5_000, 20);
  assert.equal(cache.lookup.podByIp(ip), undefined);
  assert.ok(cache.lookup.pod('shop', SAMPLE_WEB), 'running pods stay');
});

