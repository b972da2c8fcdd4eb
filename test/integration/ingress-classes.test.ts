// A cluster with two ingress controllers (the sample's ingress-nginx and a Traefik beside it): an
// Ingress host goes to the controller whose IngressClass (spec.controller) its Ingress names — by
// spec.ingressClassName, the legacy kubernetes.io/ingress.class annotation, or the default class —
// not to the first controller found; classes and IngressClasses that change while the proxy runs
// are followed; a class no controller here serves, and one host two classes claim, are refused
// with a message naming them. The simulated controller pods say who answered
// (X-Sim-Ingress-Controller).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { seedIngressCluster, INGRESS_SAMPLE } from '../sim/ingress-sample.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
const NGINX = `${INGRESS_SAMPLE.controller.namespace}/${INGRESS_SAMPLE.controller.pod}`;
const TRAEFIK = 'traefik/traefik-5d8f7c9b6-q7w2e';
const backend = [{ service: 'web', port: 8080 }];

before(async () => {
  cluster = await startTestCluster();
  const sim = cluster.sim;
  await seedIngressCluster(sim);
  const labels = { 'app.kubernetes.io/name': 'traefik' };
  await sim.createPod({ namespace: 'traefik', name: TRAEFIK.split('/')[1]!, labels, ports: [{ name: 'web', containerPort: 8000, backend: 'ingress-http' }] });
  await sim.createService({ namespace: 'traefik', name: 'traefik', selector: labels, ports: [{ name: 'web', port: 80, targetPort: 'web' }] });
  sim.createIngressClass('nginx', 'k8s.io/ingress-nginx');
  sim.createIngressClass('traefik', 'traefik.io/ingress-controller');
  await sim.createIngress({ namespace: 'shop', name: 'dash', className: 'traefik', rules: [{ host: 'dash.apps.sim.test', paths: backend }] });
  await sim.createIngress({ namespace: 'shop', name: 'tools', className: 'traefik', rules: [{ host: '*.tools.sim.test', paths: backend }] });
  await sim.createIngress({
    namespace: 'shop',
    name: 'legacy',
    annotations: { 'kubernetes.io/ingress.class': 'traefik' },
    rules: [{ host: 'legacy.apps.sim.test', paths: backend }],
  });
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', 'off', '--listen-http', '127.0.0.1:0', '--log-level', 'debug']);
});

after(async () => {
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

/**
 * Which controller pod answered http://host/ through the proxy, or the proxy's refusal ("503
 * <text>"). Through CONNECT, a new stream each time: a forwarded request may reuse a pooled
 * connection to the controller that served the host before.
 */
async function answeredBy(host: string): Promise<string> {
  const r = await curl(['-i', '--proxytunnel', '--proxy', `http://${proxy.http}`, `http://${host}/`]);
  const pod = /^x-sim-ingress-controller: (\S+)/im.exec(r.stdout)?.[1];
  if (pod) return pod;
  // Refused: the proxy's answer to a forwarded request carries its message.
  const refused = await curl(['-i', '--proxy', `http://${proxy.http}`, `http://${host}/`]);
  assert.equal(refused.code, 0, `${host}: ${refused.stderr}`);
  return `${/^HTTP\/1\.1 (\d+)/.exec(refused.stdout)?.[1]} ${refused.stdout.slice(refused.stdout.indexOf('\r\n\r\n') + 4).trim()}`;
}

function becomes(host: string, want: RegExp | string): Promise<string> {
  return eventually(
    async () => {
      const got = await answeredBy(host);
      return (typeof want === 'string' ? got === want : want.test(got)) && got;
    },
    10_000,
    100,
  );
}

test("each host goes to the controller of its Ingress's class: ingressClassName, the legacy annotation, a wildcard", async () => {
  await becomes('dash.apps.sim.test', TRAEFIK);
  assert.equal(await answeredBy('legacy.apps.sim.test'), TRAEFIK);
  assert.equal(await answeredBy('grafana.tools.sim.test'), TRAEFIK, 'a wildcard host');
  assert.equal(await answeredBy(INGRESS_SAMPLE.web.host), NGINX);
});

test('an Ingress whose class changes goes to the other controller', async () => {
  const sim = cluster.sim;
  await sim.createIngress({ namespace: 'shop', name: 'moving', className: 'nginx', rules: [{ host: 'moving.apps.sim.test', paths: backend }] });
  await becomes('moving.apps.sim.test', NGINX);
  sim.updateIngress({ namespace: 'shop', name: 'moving', className: 'traefik', rules: [{ host: 'moving.apps.sim.test', paths: backend }] });
  await becomes('moving.apps.sim.test', TRAEFIK);
});

test('no class: the default IngressClass, followed as the annotation comes and goes', async () => {
  const sim = cluster.sim;
  await sim.createIngress({ namespace: 'shop', name: 'plain', rules: [{ host: 'plain.apps.sim.test', paths: backend }] });
  // No default class: the first controller found, as before classes were read.
  await becomes('plain.apps.sim.test', NGINX);
  sim.deleteIngressClass('traefik');
  sim.createIngressClass('traefik', 'traefik.io/ingress-controller', true);
  await becomes('plain.apps.sim.test', TRAEFIK);
});

test('a class no controller here serves is refused naming it; its IngressClass removed, the host is served again', async () => {
  const sim = cluster.sim;
  await sim.createIngress({ namespace: 'shop', name: 'inner', className: 'internal', rules: [{ host: 'inner.apps.sim.test', paths: backend }] });
  // No IngressClass "internal" (yet): nothing says which controller, the first one serves it.
  await becomes('inner.apps.sim.test', NGINX);
  sim.createIngressClass('internal', 'k8s.io/internal-ingress-nginx');
  const refused = await becomes('inner.apps.sim.test', /^503 /);
  assert.match(refused, /class "internal" \(controller k8s\.io\/internal-ingress-nginx\): no ingress controller Service found for it/);
  assert.match(refused, /set ingress\.classes\.<class> to the namespace\/service/);
  sim.deleteIngressClass('internal');
  await becomes('inner.apps.sim.test', NGINX);
});

test('one host two Ingresses of different classes claim is refused naming both; one left, it is served', async () => {
  const sim = cluster.sim;
  await sim.createIngress({ namespace: 'shop', name: 'both-a', className: 'nginx', rules: [{ host: 'both.apps.sim.test', paths: backend }] });
  await sim.createIngress({ namespace: 'shop', name: 'both-b', className: 'traefik', rules: [{ host: 'both.apps.sim.test', paths: backend }] });
  const refused = await becomes('both.apps.sim.test', /^503 /);
  assert.match(
    refused,
    /served by different ingress controllers \(class "nginx": ingress-nginx\/ingress-nginx-controller; class "traefik": traefik\/traefik\)/,
  );
  sim.deleteIngress('shop', 'both-a');
  await becomes('both.apps.sim.test', TRAEFIK);
});

test('ingress.classes sends a class to a controller Service detection does not know; the other classes still detected', async () => {
  const sim = cluster.sim;
  const labels = { 'app.kubernetes.io/instance': 'internal' };
  await sim.createPod({ namespace: 'ingress-internal', name: 'internal-ctl-0', labels, ports: [{ name: 'http', containerPort: 80, backend: 'ingress-http' }] });
  await sim.createService({
    namespace: 'ingress-internal',
    name: 'ingress-nginx-controller',
    selector: labels,
    ports: [{ name: 'http', port: 80, targetPort: 'http' }],
  });
  sim.createIngressClass('internal', 'k8s.io/internal-ingress-nginx');
  await sim.createIngress({ namespace: 'shop', name: 'intra', className: 'internal', rules: [{ host: 'intra.apps.sim.test', paths: backend }] });
  const configFile = path.join(cluster.dir, 'classes.yaml');
  const context = cluster.sim.kubeconfigYaml().match(/current-context: "?([^"\n]+)/)![1]!;
  await writeFile(
    configFile,
    `routes:\n  - name: sim\n    kind: cluster\n    context: ${context}\n    ingress:\n      classes: {internal: ingress-internal/ingress-nginx-controller}\n`,
  );
  const first = proxy;
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--config', configFile, '--listen-socks', 'off', '--listen-http', '127.0.0.1:0']);
  try {
    await becomes('intra.apps.sim.test', 'ingress-internal/internal-ctl-0');
    assert.equal(await answeredBy('dash.apps.sim.test'), TRAEFIK);
    assert.equal(await answeredBy(INGRESS_SAMPLE.web.host), NGINX);
  } finally {
    await proxy.stop();
    proxy = first;
  }
});
