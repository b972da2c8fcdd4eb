// A small sample cluster for tests and demos. Names are fixed (exported in SAMPLE) so tests can
// refer to them; pod IPs come from the simulator's allocator (use sim.podIP()).
//
//   shop/web       Deployment-like: 3 pods (http backend, containerPort 8081 named "http"),
//                  Service port 8080 → targetPort "http" (the named port must be resolved per pod)
//   shop/api       2 pods (http backend on 8080), Service port 80 → targetPort 8080
//   shop/db        headless Service (clusterIP None) with pods db-0, db-1 (hostname db-N,
//                  subdomain db, banner backend on 5432 named "postgres")
//   shop/external  ExternalName Service → external.example.com (never dialled)
//   data/echo      1 pod (raw TCP echo on 7000 named "tcp"), Service port 7000 → 7000
//   default/hello  1 pod (http backend on 8080), Service port 80 → 8080
import type { SimCluster } from './cluster.js';

export const SAMPLE = {
  namespaces: ['shop', 'default', 'data'],
  web: {
    namespace: 'shop',
    service: 'web',
    servicePort: 8080,
    containerPort: 8081,
    pods: ['web-7c9d6b5f8-4xk2p', 'web-7c9d6b5f8-9m7tq', 'web-7c9d6b5f8-bz8wd'],
  },
  api: { namespace: 'shop', service: 'api', servicePort: 80, containerPort: 8080, pods: ['api-5f6d8c7b9-kq4vz', 'api-5f6d8c7b9-t8wxn'] },
  db: { namespace: 'shop', service: 'db', servicePort: 5432, containerPort: 5432, pods: ['db-0', 'db-1'] },
  external: { namespace: 'shop', service: 'external', externalName: 'external.example.com' },
  echo: { namespace: 'data', service: 'echo', servicePort: 7000, containerPort: 7000, pods: ['echo-6b8f9d7c5-r2lsm'] },
  hello: { namespace: 'default', service: 'hello', servicePort: 80, containerPort: 8080, pods: ['hello-84c7d9b6f5-ptx7c'] },
} as const;

export async function seedSampleCluster(sim: SimCluster): Promise<void> {
  for (const ns of SAMPLE.namespaces) await sim.createNamespace(ns);

  const web = SAMPLE.web;
  for (const name of web.pods) {
    await sim.createPod({
      namespace: web.namespace,
      name,
      labels: { app: 'web', 'pod-template-hash': '7c9d6b5f8' },
      ports: [{ name: 'http', containerPort: web.containerPort, backend: 'http' }],
    });
  }
  await sim.createService({
    namespace: web.namespace,
    name: web.service,
    selector: { app: 'web' },
    ports: [{ name: 'http', port: web.servicePort, targetPort: 'http' }],
  });

  const api = SAMPLE.api;
  for (const name of api.pods) {
    await sim.createPod({
      namespace: api.namespace,
      name,
      labels: { app: 'api', 'pod-template-hash': '5f6d8c7b9' },
      ports: [{ containerPort: api.containerPort, backend: 'http' }],
    });
  }
  await sim.createService({
    namespace: api.namespace,
    name: api.service,
    selector: { app: 'api' },
    ports: [{ name: 'http', port: api.servicePort, targetPort: api.containerPort }],
  });

  const db = SAMPLE.db;
  for (const name of db.pods) {
    await sim.createPod({
      namespace: db.namespace,
      name,
      labels: { app: 'db', 'statefulset.kubernetes.io/pod-name': name },
      hostname: name,
      subdomain: 'db',
      ports: [{ name: 'postgres', containerPort: db.containerPort, backend: 'banner' }],
    });
  }
  await sim.createService({
    namespace: db.namespace,
    name: db.service,
    headless: true,
    selector: { app: 'db' },
    ports: [{ name: 'postgres', port: db.servicePort, targetPort: db.containerPort }],
  });

  const ext = SAMPLE.external;
  await sim.createService({ namespace: ext.namespace, name: ext.service, type: 'ExternalName', externalName: ext.externalName, ports: [] });

  const echo = SAMPLE.echo;
  for (const name of echo.pods) {
    await sim.createPod({
      namespace: echo.namespace,
      name,
      labels: { app: 'echo' },
      ports: [{ name: 'tcp', containerPort: echo.containerPort, backend: 'echo' }],
    });
  }
  await sim.createService({
    namespace: echo.namespace,
    name: echo.service,
    selector: { app: 'echo' },
    ports: [{ name: 'tcp', port: echo.servicePort, targetPort: echo.containerPort }],
  });

  const hello = SAMPLE.hello;
  for (const name of hello.pods) {
    await sim.createPod({
      namespace: hello.namespace,
      name,
      labels: { app: 'hello' },
      ports: [{ name: 'http', containerPort: hello.containerPort, backend: 'http' }],
    });
  }
  await sim.createService({
    namespace: hello.namespace,
    name: hello.service,
    selector: { app: 'hello' },
    ports: [{ name: 'http', port: hello.servicePort, targetPort: hello.containerPort }],
  });
}
