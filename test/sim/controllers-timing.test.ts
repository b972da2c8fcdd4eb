// The simulator's EndpointSlice controller lags a change when asked to (endpointSliceDelayMs), as
// kube-controller-manager does upstream (docs/real-cluster.md); by default it runs in the same instant.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimCluster } from './cluster.js';
import { apiGet } from '../helpers/cluster.js';

const slicesOf = async (sim: SimCluster, name: string) =>
  ((await apiGet(sim, `/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D${name}`)).items as unknown[])
    .length;

test('endpointSliceDelayMs: the slice of a new Service comes that much later; 0 (the default): at once', async (t) => {
  for (const delay of [0, 150]) {
    const sim = await SimCluster.start({ quiet: true, endpointSliceDelayMs: delay });
    t.after(() => sim.stop());
    await sim.createNamespace('shop');
    await sim.createPod({ namespace: 'shop', name: 'a-1', labels: { app: 'a' }, ports: [{ containerPort: 8080, backend: 'http' }] });
    await sim.createService({ namespace: 'shop', name: 'a', selector: { app: 'a' }, ports: [{ port: 80, targetPort: 8080 }] });
    assert.equal(await slicesOf(sim, 'a'), delay ? 0 : 1, `right after the Service (delay ${delay})`);
    await new Promise((r) => setTimeout(r, delay + 100));
    assert.equal(await slicesOf(sim, 'a'), 1, `after ${delay + 100} ms`);
  }
});
