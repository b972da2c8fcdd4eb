// An ingress-nginx-like controller and a few Ingresses on top of the sample cluster (sample.ts),
// for tests of ingress host names through the proxy. Host names are under .test (RFC 2606), so
// nothing outside the test can answer them.
//
//   ingress-nginx/ingress-nginx-controller  Service: 80 → "http", 443 → "https"; one pod whose
//                        backends are the simulated controller (ingress.ts): HTTP on 80, HTTPS on 443
//   shop/web      Ingress  web.apps.sim.test            → shop/web:8080 (HTTP only, no TLS entry)
//   shop/secure   Ingress  secure.apps.sim.test (TLS)   → shop/api:80
//   default/wild  Ingress  *.wild.sim.test (TLS, wildcard) → default/hello:80
//
// HTTPS answers carry a certificate from the simulated CA (sim.caPem) for the TLS host; names
// without a TLS entry get the controller's default certificate (CN DEFAULT_CERT_CN).
import type { SimCluster } from './cluster.js';

export const INGRESS_SAMPLE = {
  controller: {
    namespace: 'ingress-nginx',
    service: 'ingress-nginx-controller',
    pod: 'ingress-nginx-controller-6f7c8d9b5-x2k4m',
    httpPort: 80,
    httpsPort: 443,
  },
  web: { namespace: 'shop', name: 'web', host: 'web.apps.sim.test', service: 'web', port: 8080 },
  secure: { namespace: 'shop', name: 'secure', host: 'secure.apps.sim.test', service: 'api', port: 80 },
  wild: { namespace: 'default', name: 'wild', host: '*.wild.sim.test', example: 'anything.wild.sim.test', service: 'hello', port: 80 },
  /** Every host the Ingresses name, sorted (what the proxy's host watcher should report). */
  hosts: ['*.wild.sim.test', 'secure.apps.sim.test', 'web.apps.sim.test'],
} as const;

/** Creates the controller (Service and pod) and the three Ingresses of INGRESS_SAMPLE. */
export async function seedIngressCluster(sim: SimCluster): Promise<typeof INGRESS_SAMPLE> {
  const c = INGRESS_SAMPLE.controller;
  const labels = { 'app.kubernetes.io/name': 'ingress-nginx', 'app.kubernetes.io/component': 'controller' };
  await sim.createPod({
    namespace: c.namespace,
    name: c.pod,
    labels,
    ports: [
      { name: 'http', containerPort: c.httpPort, backend: 'ingress-http' },
      { name: 'https', containerPort: c.httpsPort, backend: 'ingress-https' },
    ],
  });
  await sim.createService({
    namespace: c.namespace,
    name: c.service,
    selector: labels,
    ports: [
      { name: 'http', port: c.httpPort, targetPort: 'http' },
      { name: 'https', port: c.httpsPort, targetPort: 'https' },
    ],
  });
  const { web, secure, wild } = INGRESS_SAMPLE;
  await sim.createIngress({
    namespace: web.namespace,
    name: web.name,
    className: 'nginx',
    rules: [{ host: web.host, paths: [{ service: web.service, port: web.port }] }],
  });
  await sim.createIngress({
    namespace: secure.namespace,
    name: secure.name,
    className: 'nginx',
    tls: [{ hosts: [secure.host], secretName: 'secure-tls' }],
    rules: [{ host: secure.host, paths: [{ service: secure.service, port: secure.port }] }],
  });
  await sim.createIngress({
    namespace: wild.namespace,
    name: wild.name,
    className: 'nginx',
    tls: [{ hosts: [wild.host], secretName: 'wild-tls' }],
    rules: [{ host: wild.host, paths: [{ service: wild.service, port: wild.port }] }],
  });
  return INGRESS_SAMPLE;
}
