// What a destination reaches in a real control plane (test/helpers/real-cluster.ts), judged by
// what a pod of that cluster would reach: names as CoreDNS's kubernetes plugin answers them, and
// Service endpoints as kube-proxy picks them. Real kubectl, real curl, the real CLI. Skips with a
// reason when the test bed is not built (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, namespace, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged, startProxies, stopProxiesAndCluster, webAddresses } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { eventually } from '../helpers/cluster.js';

const skip = skipUnlessRealCluster();

const externalName = (name: string, target: string) => ({
  apiVersion: 'v1',
  kind: 'Service',
  metadata: { name, namespace: 'other' },
  spec: { type: 'ExternalName', externalName: target },
});

const MANIFESTS = manifests(
  webDeployment(2),
  webService(),
  // A Service without a selector, as operators make them for a leader: the endpoints are written by hand.
  { apiVersion: 'v1', kind: 'Service', metadata: { name: 'leader', namespace: 'shop' }, spec: { ports: [{ name: 'http', port: 80, targetPort: 8080 }] } },
  namespace('other'),
  // Aliases: of a Service in another namespace, and of a host outside the cluster.
  externalName('web', 'web.shop.svc.cluster.local'),
  externalName('outside', 'example.org'),
);

/** The hand-made slice of Service leader: one address, no targetRef (what a mirrored hand-written Endpoints gives too). */
function leaderSlice(address: string): string {
  return manifests({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'leader-1', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'leader' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    endpoints: [{ addresses: [address] }],
  });
}

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();
let webPodName = '';
let webPodIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await applyAndRollOut(cluster, MANIFESTS, ['deployment/web']);
  ({ podName: webPodName, podIP: webPodIP } = await webAddresses(cluster));
  await cluster.kubectl(['apply', '-f', '-'], { input: leaderSlice(webPodIP) });
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** curl through the HTTP listener (absolute form): its exit code and what it printed. */
async function viaHttp(url: string): Promise<{ code: number; out: string }> {
  const r = await curl(['-x', `http://${proxies.get('spdy')!.http}`, url]);
  return { code: r.code, out: r.stdout + r.stderr };
}

test("a selector-less Service's hand-made endpoint at a Pod IP reaches that pod, as kube-proxy sends it there", { skip }, async () => {
  for (const host of ['leader', 'leader.shop.svc.cluster.local']) {
    const r = await viaHttp(`http://${host}/`);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, new RegExp(`pod=${webPodName} namespace=shop port=8080`), host);
  }
  const clusterIP = (await cluster!.kubectl(['-n', 'shop', 'get', 'svc', 'leader', '-o', 'jsonpath={.spec.clusterIP}'])).stdout.trim();
  assert.match((await viaHttp(`http://${clusterIP}/`)).out, new RegExp(`pod=${webPodName} `), 'its ClusterIP alike');
  // An address no pod has: refused, naming it.
  await cluster!.kubectl(['apply', '-f', '-'], { input: leaderSlice('192.0.2.10') });
  const refusal = await eventually(async () => {
    const r = await viaHttp('http://leader.shop/');
    return /192\.0\.2\.10/.test(r.out) && r.out;
  });
  assert.match(refusal, /not pods nor any running pod's address/);
  await cluster!.kubectl(['apply', '-f', '-'], { input: leaderSlice(webPodIP) });
});

test('a web pod is named by its address, dashed, under its Service with a ClusterIP, as CoreDNS names it; the port as asked', { skip }, async () => {
  const dashed = webPodIP.replaceAll('.', '-');
  const r = await viaHttp(`http://${dashed}.web.shop.svc.cluster.local:8080/`);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, new RegExp(`pod=${webPodName} namespace=shop port=8080`));
});

test('an ExternalName Service for a name in the cluster domain reaches what that name does, as CoreDNS follows the CNAME', { skip }, async () => {
  for (const host of ['web.other', 'web.other.svc.cluster.local']) {
    const r = await viaHttp(`http://${host}/`);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /pod=web-\S+ namespace=shop port=8080/, host);
  }
  // A host outside the cluster is reached from the cluster's network, which a port-forward is not.
  const outside = await curl(['-x', `http://${proxies.get('spdy')!.http}`, 'http://outside.other/']);
  assert.match(outside.stdout, /ExternalName Service for example\.org, outside the cluster/);
});
