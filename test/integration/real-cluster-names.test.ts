// What a destination reaches in a real control plane (test/helpers/real-cluster.ts), judged by
// what a pod of that cluster would reach: names as CoreDNS's kubernetes plugin answers them, and
// Service endpoints as kube-proxy picks them. Real kubectl, real curl, the real CLI. Skips with a
// reason when the test bed is not built (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { deployment, httpContainer, manifests, namespace, pod, service, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import {
  applyAndRollOut,
  endpointSlicesCaughtUp,
  startClusterLogged,
  startProxies,
  stopProxiesAndCluster,
  webAddresses,
} from '../helpers/real-cluster-setup.js';
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
  // A native sidecar (an init container that keeps running) with a named port a Service targets.
  pod({
    name: 'meshed',
    containers: [httpContainer('app')],
    spec: { initContainers: [{ name: 'proxy', image: 'proxyout/http', restartPolicy: 'Always', ports: [{ name: 'admin', containerPort: 15000 }] }] },
  }),
  service('meshed', { ports: [{ name: 'admin', port: 80, targetPort: 'admin' }] }),
  // A StatefulSet-like pod that is not ready, under its headless Service: DNS does not name it.
  pod({
    name: 'peer-0',
    annotations: { 'proxyout.test/ready': 'false' },
    containers: [httpContainer('app')],
    spec: { hostname: 'peer-0', subdomain: 'peers' },
  }),
  service('peers', { selector: { app: 'peer-0' }, clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
  // A pod that drains for 20 s once deleted, behind a ClusterIP and a headless Service.
  pod({ name: 'drain', annotations: { 'proxyout.test/stop-delay': '20s' }, containers: [httpContainer('drain')] }),
  service('drain', { ports: [{ name: 'http', port: 80, targetPort: 'http' }] }),
  service('drain-hl', { selector: { app: 'drain' }, clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
  // A readiness gate (a load balancer controller's, say) not yet met: the pod is not Ready.
  pod({ name: 'gated', containers: [httpContainer('app')], spec: { readinessGates: [{ conditionType: 'proxyout.test/gate' }] } }),
  service('gated', { ports: [{ name: 'http', port: 80, targetPort: 'http' }] }),
  // A Deployment whose template sets hostname and subdomain: its pods share the name.
  deployment({ name: 'twins', replicas: 2, containers: [httpContainer('app')], spec: { hostname: 'twin', subdomain: 'twins' } }),
  service('twins', { clusterIP: 'None', ports: [{ name: 'http', port: 8080 }] }),
  // Blue/green: Service switch selects the web pods, then green's.
  deployment({ name: 'green', replicas: 1, containers: [httpContainer('web')] }),
  service('switch', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'http' }] }),
  // A targetPort no pod has (a typo): the controller writes the slice without ports.
  service('typo', { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 'htpp' }] }),
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: 'dns', namespace: 'shop' },
    spec: { selector: { app: 'web' }, ports: [{ name: 'dns', port: 53, protocol: 'UDP' }] },
  },
);

/** The hand-made slice of Service leader: one address, no targetRef (what a mirrored hand-written Endpoints gives too). */
function leaderSlice(address: string, ports: object[] | null = [{ name: 'http', port: 8080, protocol: 'TCP' }]): string {
  return manifests({
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'leader-1', namespace: 'shop', labels: { 'kubernetes.io/service-name': 'leader' } },
    addressType: 'IPv4',
    ...(ports ? { ports } : {}),
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
  await applyAndRollOut(cluster, MANIFESTS, ['deployment/web', 'deployment/green', 'deployment/twins']);
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/meshed', 'pod/drain', '--timeout=30s']);
  await endpointSlicesCaughtUp(cluster);
  ({ podName: webPodName, podIP: webPodIP } = await webAddresses(cluster));
  await cluster.kubectl(['apply', '-f', '-'], { input: leaderSlice(webPodIP) });
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** curl through the HTTP listener (absolute form): its exit code and what it printed (exit 0 for a 502/503 page too). */
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

test(
  "a hand-made slice without a port of the Service port's name gives it no endpoint, as kube-proxy: refused saying so, never sent to the targetPort",
  { skip },
  async () => {
    // No ports at all, then a port of another name: kube-proxy has no endpoint for Service port "http" either way.
    for (const ports of [null, [{ name: 'web', port: 8080, protocol: 'TCP' }]]) {
      await cluster!.kubectl(['apply', '-f', '-'], { input: leaderSlice(webPodIP, ports) });
      const refusal = await eventually(async () => {
        const r = await viaHttp('http://leader.shop/');
        return !/pod=/.test(r.out) && r.out;
      });
      assert.match(
        refusal,
        /service shop\/leader:80: none of its endpoints \(1\) has a port for it: their EndpointSlices, not written by the EndpointSlice controller, have no TCP port named "http", so kube-proxy sends nothing to them/,
      );
    }
    await cluster!.kubectl(['apply', '-f', '-'], { input: leaderSlice(webPodIP) });
    await eventually(async () => /pod=/.test((await viaHttp('http://leader.shop/')).out));
  },
);

test(
  'a pod that terminates but still serves: its ClusterIP Service reaches it, as kube-proxy; its headless name is refused, as cluster DNS',
  { skip },
  async () => {
    await eventually(async () => /pod=drain /.test((await viaHttp('http://drain-hl:8080/')).out));
    await cluster!.kubectl(['-n', 'shop', 'delete', 'pod', 'drain', '--wait=false']);
    const refusal = await eventually(async () => {
      const r = await viaHttp('http://drain-hl:8080/');
      return !/pod=/.test(r.out) && r.out;
    });
    assert.match(
      refusal,
      /service shop\/drain-hl:8080 has no ready endpoint: its one endpoint, pod shop\/drain, is not ready \(a headless name: cluster DNS answers ready endpoints only\)/,
    );
    assert.match((await viaHttp('http://drain/')).out, /pod=drain namespace=shop port=8080/, 'the ClusterIP Service falls back to it');
    await cluster!.kubectl(['-n', 'shop', 'delete', 'pod', 'drain', '--grace-period=0', '--force', '--wait=false']);
  },
);

test('a Service deleted and made again with another ClusterIP: the old IP is refused, the new one and the name reach it', { skip }, async () => {
  const made = (clusterIP: string) => {
    const svc = webService('again') as { spec: Record<string, unknown> };
    svc.spec.clusterIP = clusterIP;
    return manifests(svc);
  };
  await cluster!.kubectl(['create', '-f', '-'], { input: made('10.96.77.1') });
  await eventually(async () => /pod=web-/.test((await viaHttp('http://10.96.77.1/')).out));
  await cluster!.kubectl(['-n', 'shop', 'delete', 'svc', 'again']);
  await cluster!.kubectl(['create', '-f', '-'], { input: made('10.96.77.2') });
  // Within seconds, as kube-proxy's rules follow: the new address and the name, never the old one.
  await eventually(async () => /pod=web-/.test((await viaHttp('http://10.96.77.2/')).out), 5_000);
  assert.match((await viaHttp('http://again/')).out, /pod=web-/);
  const old = await viaHttp('http://10.96.77.1/');
  assert.doesNotMatch(old.out, /pod=/);
  assert.match(old.out, /10\.96\.77\.1 is in no route's cidrs and no cluster knows it as a Service ClusterIP or Pod IP/);
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

test("a named targetPort that a native sidecar has reaches the sidecar's port, as the controller resolves it (podutil.FindPort)", { skip }, async () => {
  const r = await eventually(async () => {
    const got = await viaHttp('http://meshed/');
    return /pod=meshed /.test(got.out) && got;
  });
  assert.match(r.out, /pod=meshed namespace=shop port=15000/);
});

test('a targetPort no pod has is refused naming it; a UDP-only port says so', { skip }, async () => {
  const typo = await viaHttp('http://typo/');
  assert.match(typo.out, /service shop\/typo:80: none of its endpoints \(2\) has a port for it: their pods have no TCP container port named "htpp"/);
  const socks = await curl(['--socks5-hostname', proxies.get('spdy')!.socks!, 'http://dns.shop:53/']);
  assert.match(socks.stderr, /\(5\)/, 'SOCKS 0x05');
  assert.match((await viaHttp('http://dns.shop:53/')).out, /Service shop\/dns has port 53 for UDP only; the proxy carries TCP streams/);
});

test(
  'a Service switched to other pods (blue/green, its selector edited): the next plain-HTTP request goes there, as a new connection would',
  { skip },
  async () => {
    // Requests closer together than the HTTP listener's idle time: its pooled tunnel stays warm.
    for (let i = 0; i < 3; i++) assert.match((await viaHttp('http://switch/')).out, /pod=web-/);
    await cluster!.kubectl(['-n', 'shop', 'patch', 'svc', 'switch', '-p', '{"spec":{"selector":{"app":"green"}}}']);
    const switched = await eventually(async () => {
      const r = await viaHttp('http://switch/');
      return /pod=green-/.test(r.out) && r.out;
    }, 3_000);
    assert.match(switched, /pod=green-/);
    for (let i = 0; i < 3; i++) assert.match((await viaHttp('http://switch/')).out, /pod=green-/, 'and stays there');
  },
);

test(
  'a selector-less Service with hand-written Endpoints (the older API, as operators write them) reaches the pod at that address, through the mirrored slice',
  { skip },
  async () => {
    const endpoints = {
      apiVersion: 'v1',
      kind: 'Endpoints',
      metadata: { name: 'legacy', namespace: 'shop' },
      subsets: [{ addresses: [{ ip: webPodIP }], ports: [{ name: 'pg', port: 8080 }] }],
    };
    const svc = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'legacy', namespace: 'shop' },
      spec: { ports: [{ name: 'pg', port: 5432, targetPort: 8080 }] },
    };
    await cluster!.kubectl(['apply', '-f', '-'], { input: manifests(svc, endpoints) });
    const r = await eventually(async () => {
      const got = await viaHttp('http://legacy:5432/');
      return /pod=/.test(got.out) && got;
    }, 5_000);
    assert.match(r.out, new RegExp(`pod=${webPodName} namespace=shop port=8080`));
  },
);

test('a pod hostname whose pod is not ready is refused saying so, as cluster DNS does not name it', { skip }, async () => {
  const r = await eventually(async () => {
    const got = await viaHttp('http://peer-0.peers.shop.svc.cluster.local:8080/');
    return /is not ready/.test(got.out) && got;
  }, 5_000);
  assert.match(r.out, /pod shop\/peer-0, hostname "peer-0" under Service shop\/peers, is not ready: cluster DNS names ready endpoints only/);
});

test('a pod whose readiness gate is not met is no endpoint; once its condition is True it is reached', { skip }, async () => {
  assert.match((await viaHttp('http://gated/')).out, /service shop\/gated:80 has no ready endpoint: its one endpoint, pod shop\/gated, is not ready/);
  const gate = { status: { conditions: [{ type: 'proxyout.test/gate', status: 'True' }] } };
  await cluster!.kubectl(['-n', 'shop', 'patch', 'pod', 'gated', '--subresource=status', '-p', JSON.stringify(gate)]);
  const r = await eventually(async () => {
    const got = await viaHttp('http://gated/');
    return /pod=gated /.test(got.out) && got;
  }, 5_000);
  assert.match(r.out, /pod=gated namespace=shop port=8080/);
});

test('a hostname the pods of a Deployment share names each of them, as CoreDNS answers an A record for each: spread', { skip }, async () => {
  const seen = new Set<string>();
  for (let i = 0; i < 6; i++) {
    // Through SOCKS: each connection is resolved anew (the HTTP listener reuses its pooled tunnel).
    const r = await curl(['--socks5-hostname', proxies.get('spdy')!.socks!, 'http://twin.twins.shop.svc.cluster.local:8080/']);
    assert.equal(r.code, 0, r.stderr);
    seen.add(/pod=(twins-\S+)/.exec(r.stdout)?.[1] ?? r.stdout);
  }
  assert.equal(seen.size, 2, [...seen].join(', '));
});

test('a two-label name with a mistyped namespace is refused naming the namespace the cluster lacks', { skip }, async () => {
  const r = await viaHttp('http://web.shpo:8080/');
  assert.match(
    r.out,
    /web\.shpo is not served by any route .*; cluster route admin: web\.shpo is no cluster name: as one it would be Service "web" in namespace "shpo", and there is no namespace "shpo"/,
  );
});

test("a pod hostname's short forms (hostname.subdomain, and .ns) reach that pod, as a pod's search path completes them", { skip }, async () => {
  for (const host of ['twin.twins', 'twin.twins.shop']) {
    // Through SOCKS: the name goes to the proxy as it is (curl's socks5h).
    const r = await curl(['--socks5-hostname', proxies.get('spdy')!.socks!, `http://${host}:8080/`]);
    assert.equal(r.code, 0, `${host}: ${r.stderr}`);
    assert.match(r.stdout, /pod=twins-\S+ namespace=shop port=8080/, host);
  }
});

test('a selector-less Service whose endpoints nobody wrote yet is refused saying so, not blaming a selector it lacks', { skip }, async () => {
  const svc = { apiVersion: 'v1', kind: 'Service', metadata: { name: 'unwritten', namespace: 'shop' }, spec: { ports: [{ port: 80 }] } };
  await cluster!.kubectl(['apply', '-f', '-'], { input: manifests(svc) });
  const r = await eventually(async () => {
    const got = await viaHttp('http://unwritten.shop/');
    return /no ready endpoint/.test(got.out) && got;
  }, 5_000);
  assert.match(r.out, /service shop\/unwritten:80 has no ready endpoint: it has no selector and no endpoints \(no EndpointSlice or Endpoints written for it\)/);
});
