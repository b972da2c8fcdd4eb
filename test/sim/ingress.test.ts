// The simulator's Ingresses, OpenShift Routes and ingress-controller backend: REST and discovery,
// real kubectl against it, and the controller answering over HTTP and HTTPS (real curl, the
// simulated CA, SNI).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, delimiter } from 'node:path';
import { SimCluster, DEFAULT_CERT_CN } from './cluster.js';
import { seedSampleCluster } from './sample.js';
import { seedIngressCluster, INGRESS_SAMPLE } from './ingress-sample.js';
import { request, WatchStream } from './testkit.js';
import { curl } from '../helpers/curl.js';

const kubectl = (process.env.PATH ?? '')
  .split(delimiter)
  .map((d) => join(d, 'kubectl'))
  .find((p) => existsSync(p));
let sim: SimCluster;
let dir: string;
let caFile: string;

before(async () => {
  sim = await SimCluster.start({ quiet: true });
  await seedSampleCluster(sim);
  await seedIngressCluster(sim);
  dir = await mkdtemp(join(tmpdir(), 'sim-ingress-'));
  caFile = join(dir, 'ca.pem');
  await writeFile(caFile, sim.caPem);
});

after(async () => {
  await sim.stop();
  await rm(dir, { recursive: true, force: true });
});

function runKubectl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const kc = join(dir, 'kubeconfig');
    writeFile(kc, sim.kubeconfigYaml(), { mode: 0o600 }).then(() => {
      execFile(
        kubectl!,
        ['--kubeconfig', kc, '--cache-dir', join(dir, 'cache'), '--request-timeout', '20s', ...args],
        { timeout: 30_000, env: { ...process.env, HOME: dir, KUBECONFIG: '' } },
        (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : 1) : 0, stdout, stderr }),
      );
    }, reject);
  });
}

test('Ingresses are listed and watched under networking.k8s.io/v1, and discovery names the group', async () => {
  const groups = (await request(sim, '/apis')).json();
  assert.ok(groups.groups.some((g: any) => g.name === 'networking.k8s.io'));
  assert.ok(!groups.groups.some((g: any) => g.name === 'route.openshift.io'), 'no OpenShift group unless switched on');
  const resources = (await request(sim, '/apis/networking.k8s.io/v1')).json();
  assert.deepEqual(
    resources.resources.map((r: any) => r.name),
    ['ingresses', 'ingresses/status', 'ingressclasses'],
  );
  const list = (await request(sim, '/apis/networking.k8s.io/v1/ingresses')).json();
  assert.equal(list.kind, 'IngressList');
  assert.deepEqual(
    list.items.map((i: any) => `${i.metadata.namespace}/${i.metadata.name}`),
    ['default/wild', 'shop/secure', 'shop/web'],
  );
  const secure = (await request(sim, '/apis/networking.k8s.io/v1/namespaces/shop/ingresses/secure')).json();
  assert.equal(secure.kind, 'Ingress');
  assert.deepEqual(secure.spec.tls, [{ hosts: ['secure.apps.sim.test'], secretName: 'secure-tls' }]);
  assert.deepEqual(secure.spec.rules[0].http.paths[0], { path: '/', pathType: 'Prefix', backend: { service: { name: 'api', port: { number: 80 } } } });

  const watch = await WatchStream.open(sim, `/apis/networking.k8s.io/v1/namespaces/shop/ingresses?watch=1&resourceVersion=${list.metadata.resourceVersion}`);
  try {
    await sim.createIngress({ namespace: 'shop', name: 'extra', rules: [{ host: 'extra.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    sim.updateIngress({ namespace: 'shop', name: 'extra', rules: [{ host: 'extra2.sim.test', paths: [{ service: 'web', port: 8080 }] }] });
    sim.deleteIngress('shop', 'extra');
    const seen = [await watch.next(), await watch.next(), await watch.next()].map((e) => `${e!.type} ${e!.object.spec.rules[0].host}`);
    assert.deepEqual(seen, ['ADDED extra.sim.test', 'MODIFIED extra2.sim.test', 'DELETED extra2.sim.test']);
  } finally {
    watch.close();
  }
});

test('OpenShift Routes: 404 on a plain API server, served (discovery, list) once switched on', async () => {
  await sim.createRoute({ namespace: 'shop', name: 'console', host: 'console.apps.sim.test', service: 'web', targetPort: 'http', tls: 'edge' });
  try {
    assert.equal((await request(sim, '/apis/route.openshift.io/v1')).status, 404);
    assert.equal((await request(sim, '/apis/route.openshift.io/v1/routes')).status, 404);
    assert.equal(sim.ingressMatch('console.apps.sim.test'), undefined, 'a plain cluster has no router for Routes');
    sim.setOpenShiftRoutes(true);
    const doc = (await request(sim, '/apis/route.openshift.io/v1')).json();
    assert.deepEqual(doc.resources.find((r: any) => r.name === 'routes').verbs.includes('watch'), true);
    const list = (await request(sim, '/apis/route.openshift.io/v1/routes')).json();
    assert.equal(list.kind, 'RouteList');
    assert.deepEqual(
      list.items.map((r: any) => r.spec.host),
      ['console.apps.sim.test'],
    );
    assert.deepEqual(sim.ingressMatch('console.apps.sim.test', '/x'), { via: 'route shop/console', namespace: 'shop', service: 'web', port: 'http' });
  } finally {
    sim.setOpenShiftRoutes(false);
    sim.deleteRoute('shop', 'console');
  }
});

test('the controller matches hosts and paths like the Ingress API: exact over wildcard, one label for "*."', () => {
  assert.equal(sim.ingressMatch('web.apps.sim.test:80', '/any/path')?.via, 'ingress shop/web');
  assert.equal(sim.ingressMatch('WEB.apps.sim.test.')?.service, 'web');
  assert.equal(sim.ingressMatch('a.wild.sim.test')?.via, 'ingress default/wild');
  assert.equal(sim.ingressMatch('a.b.wild.sim.test'), undefined, '"*." matches exactly one label');
  assert.equal(sim.ingressMatch('wild.sim.test'), undefined);
  assert.equal(sim.ingressMatch('nope.sim.test'), undefined);
});

test('kubectl get ingress -A (and routes when served) against the simulator', async (t) => {
  if (!kubectl) return t.skip('kubectl not on PATH: fidelity check skipped');
  const r = await runKubectl(['get', 'ingress', '-A']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^NAMESPACE\s+NAME\s+CLASS\s+HOSTS\s+ADDRESS\s+PORTS\s+AGE$/m);
  assert.match(r.stdout, /^shop\s+secure\s+nginx\s+secure\.apps\.sim\.test\s+127\.0\.0\.1\s+80, 443\s+\S+$/m);
  assert.match(r.stdout, /^shop\s+web\s+nginx\s+web\.apps\.sim\.test\s+127\.0\.0\.1\s+80\s+\S+$/m);
  assert.match(r.stdout, /^default\s+wild\s+nginx\s+\*\.wild\.sim\.test\s/m);
  const json = await runKubectl(['get', 'ing', 'secure', '-n', 'shop', '-o', 'jsonpath={.spec.tls[0].hosts[0]}']);
  assert.equal(json.code, 0, json.stderr);
  assert.equal(json.stdout, 'secure.apps.sim.test');
  const noRoutes = await runKubectl(['get', 'routes.route.openshift.io', '-A']);
  assert.notEqual(noRoutes.code, 0, 'a plain Kubernetes API server has no routes');
  assert.match(noRoutes.stderr, /the server doesn't have a resource type/);

  sim.setOpenShiftRoutes(true);
  await sim.createRoute({ namespace: 'shop', name: 'console', host: 'console.apps.sim.test', service: 'web', targetPort: 'http', tls: 'edge' });
  try {
    // A new cache dir: kubectl caches discovery, and the group list just changed.
    const routes = await runKubectl(['get', 'routes', '-A', '--cache-dir', join(dir, 'cache-openshift')]);
    assert.equal(routes.code, 0, routes.stderr);
    assert.match(routes.stdout, /^shop\s+console\s+console\.apps\.sim\.test\s+web\s+http\s+edge\s+None$/m);
  } finally {
    sim.deleteRoute('shop', 'console');
    sim.setOpenShiftRoutes(false);
  }
});

/** curl straight to the controller pod's backend, keeping the Host header and SNI of `url`. */
function curlController(url: string, extra: string[] = []) {
  const c = INGRESS_SAMPLE.controller;
  const u = new URL(url);
  const port = u.protocol === 'https:' ? c.httpsPort : c.httpPort;
  const target = sim.backendAddress(c.namespace, c.pod, port)!;
  return curl(['--connect-to', `${u.hostname}:${u.port || port}:${target.host}:${target.port}`, '--cacert', caFile, ...extra, url]);
}

test('the controller answers HTTP by Host header with the bytes it saw', async () => {
  const r = await curlController('http://web.apps.sim.test/some/path?q=1', ['--data-binary', 'hello ingress']);
  assert.equal(r.code, 0, r.stderr);
  // sha256("hello ingress") starts with this prefix.
  const { createHash } = await import('node:crypto');
  const digest = createHash('sha256').update('hello ingress').digest('hex').slice(0, 16);
  assert.equal(r.stdout, `ingress web.apps.sim.test /some/path?q=1 -> shop/web:8080 via ingress shop/web; tls off; body 13 ${digest}\n`);
  const none = await curlController('http://nope.sim.test/', ['--write-out', '%{http_code}']);
  assert.equal(none.stdout, 'ingress nope.sim.test / -> no rule; tls off; body 0 e3b0c44298fc1c14\n404');
});

test('the controller terminates TLS with a simulated-CA certificate for the SNI name (exact and wildcard hosts)', async () => {
  const secure = await curlController('https://secure.apps.sim.test/login');
  assert.equal(secure.code, 0, secure.stderr);
  assert.equal(
    secure.stdout,
    'ingress secure.apps.sim.test /login -> shop/api:80 via ingress shop/secure; tls secure.apps.sim.test; body 0 e3b0c44298fc1c14\n',
  );
  const wild = await curlController('https://anything.wild.sim.test/');
  assert.equal(wild.code, 0, wild.stderr);
  assert.match(wild.stdout, / -> default\/hello:80 via ingress default\/wild; tls anything\.wild\.sim\.test;/);
  // A name with no TLS entry gets the default certificate: curl refuses it (wrong name)…
  const plain = await curlController('https://web.apps.sim.test/');
  assert.notEqual(plain.code, 0);
  assert.match(plain.stderr, /SSL: no alternative certificate subject name matches|certificate subject name/i);
  // …and it is the controller's default one, issued by the simulated CA.
  const insecure = await curlController('https://web.apps.sim.test/', ['--insecure', '--verbose']);
  assert.equal(insecure.code, 0, insecure.stderr);
  assert.ok(insecure.stderr.includes(DEFAULT_CERT_CN), insecure.stderr);
  assert.match(insecure.stderr, /issuer: CN=kubernetes-sim-ca/);
});
