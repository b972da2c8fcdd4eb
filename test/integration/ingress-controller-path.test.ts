// The simulated ingress controller (seedIngressCluster) behind the proxy, reached by its Service
// name: the path the routing table sends ingress host names down. curl's --connect-to keeps the
// Host header and SNI of the ingress host while the proxy is asked for the controller Service, so
// this proves HTTP and TLS (SNI, the simulated CA's certificate) go through the proxy's
// port-forward untouched. ingress-routing.test.ts asks for the ingress host itself.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { eventually, startTestCluster, type TestCluster } from '../helpers/cluster.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { seedIngressCluster, INGRESS_SAMPLE } from '../sim/ingress-sample.js';

let cluster: TestCluster;
let proxy: ProxyProcess;
let caFile: string;
const { controller } = INGRESS_SAMPLE;
const controllerName = `${controller.service}.${controller.namespace}.svc.cluster.local`;

before(async () => {
  cluster = await startTestCluster();
  await seedIngressCluster(cluster.sim);
  caFile = path.join(cluster.dir, 'ca.pem');
  await writeFile(caFile, cluster.sim.caPem);
  proxy = await startProxyProcess(['--kubeconfig', cluster.kubeconfig, '--listen-socks', '127.0.0.1:0', '--log-level', 'debug']);
});

after(async () => {
  // The runtime keeps a stream ~1 s after a FIN (closeGraceMs): the last tests' streams end now, so
  // the stop below has none to drain (teardown, not a test of the drain).
  cluster?.sim.endLingeringStreams();
  await proxy?.stop();
  await cluster?.close();
});

function viaController(url: string, port: number, extra: string[] = []) {
  const host = new URL(url).hostname;
  return curl(['--proxy', `socks5h://${proxy.socks}`, '--connect-to', `${host}:${port}:${controllerName}:${port}`, '--cacert', caFile, ...extra, url]);
}

test('HTTP through the proxy to the controller Service: Host header, path and body arrive as sent', async () => {
  const r = await viaController(`http://${INGRESS_SAMPLE.web.host}/a/b?c=d`, 80, ['--data-binary', 'hello ingress']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^ingress web\.apps\.sim\.test \/a\/b\?c=d -> shop\/web:8080 via ingress shop\/web; tls off; body 13 /);
});

test('HTTPS through the proxy: SNI reaches the controller, its simulated-CA certificate verifies for the host', async () => {
  const r = await viaController(`https://${INGRESS_SAMPLE.secure.host}/login`, 443);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'ingress secure.apps.sim.test /login -> shop/api:80 via ingress shop/secure; tls secure.apps.sim.test; body 0 e3b0c44298fc1c14\n');
  const wild = await viaController(`https://${INGRESS_SAMPLE.wild.example}/`, 443);
  assert.equal(wild.code, 0, wild.stderr);
  assert.match(wild.stdout, /-> default\/hello:80 via ingress default\/wild; tls anything\.wild\.sim\.test;/);
});

// End to end: the ingress host names themselves, learnt from the cluster's Ingresses.
function direct(url: string, extra: string[] = []) {
  return curl(['--proxy', `socks5h://${proxy.socks}`, '--cacert', caFile, ...extra, url]);
}

test('ingress hosts learnt from the cluster route to its controller: HTTP, HTTPS (SNI untouched), wildcards, new Ingresses', async () => {
  const web = await direct(`http://${INGRESS_SAMPLE.web.host}/x`);
  assert.equal(web.code, 0, web.stderr);
  assert.match(web.stdout, /^ingress web\.apps\.sim\.test \/x -> shop\/web:8080 via ingress shop\/web; tls off;/);
  const secure = await direct(`https://${INGRESS_SAMPLE.secure.host}/login`);
  assert.equal(secure.code, 0, secure.stderr);
  assert.match(secure.stdout, /tls secure\.apps\.sim\.test;/);
  const wild = await direct(`https://${INGRESS_SAMPLE.wild.example}/`);
  assert.equal(wild.code, 0, wild.stderr);
  assert.match(wild.stdout, /via ingress default\/wild; tls anything\.wild\.sim\.test;/);
  // A host that no Ingress names (and no route claims) is refused: learnt hosts are exact.
  assert.notEqual((await direct('http://other.apps.sim.test/')).code, 0);
  await cluster.sim.createIngress({
    namespace: 'shop',
    name: 'late',
    className: 'nginx',
    rules: [{ host: 'late.apps.sim.test', paths: [{ service: 'web', port: 8080 }] }],
  });
  const late = await eventually(
    async () => {
      const r = await direct('http://late.apps.sim.test/');
      return r.code === 0 && r;
    },
    10_000,
    100,
  );
  assert.match(late.stdout, /^ingress late\.apps\.sim\.test \/ -> shop\/web:8080/);
  assert.ok(
    proxy.logs.some((l) => l.msg === 'stream open' && String(l.target).startsWith('late.apps.sim.test') && String(l.via).startsWith('ingress-nginx/')),
    'the stream went to the controller pod',
  );
});
