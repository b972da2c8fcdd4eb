// The simulator's EndpointSlice controller on pod shapes the cluster helpers do not make, checked
// against what kube-controller-manager v1.37.2 writes (k8s.io/endpointslice utils.go FindPort).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, type KObject } from './store.js';
import { EndpointsController } from './controllers.js';

test("a named targetPort is a native sidecar's port too (an init container with restartPolicy Always), not a plain init container's", () => {
  const store = new Store();
  store.create('namespaces', { metadata: { name: 'shop' } } as KObject);
  store.create('pods', {
    metadata: { namespace: 'shop', name: 'mesh-1', labels: { app: 'mesh' } },
    spec: {
      nodeName: 'sim-node',
      initContainers: [
        { name: 'setup', ports: [{ name: 'admin', containerPort: 1 }] },
        { name: 'proxy', restartPolicy: 'Always', ports: [{ name: 'admin', containerPort: 15000 }] },
      ],
      containers: [{ name: 'app', ports: [{ name: 'http', containerPort: 8080 }] }],
    },
    status: { phase: 'Running', podIP: '10.0.2.1', conditions: [{ type: 'Ready', status: 'True' }] },
  } as unknown as KObject);
  store.create('services', {
    metadata: { namespace: 'shop', name: 'mesh' },
    spec: { selector: { app: 'mesh' }, ports: [{ name: 'admin', port: 80, targetPort: 'admin', protocol: 'TCP' }] },
  } as unknown as KObject);
  new EndpointsController(store).syncService('shop', 'mesh');
  const [slice] = store.list('endpointslices', 'shop') as Array<KObject & { ports: unknown }>;
  assert.deepEqual(slice.ports, [{ name: 'admin', port: 15000, protocol: 'TCP' }]);
});
