// IPv6 and dual-stack against the real control plane: one bed with ClusterIP ranges 10.96.0.0/16
// and fd00:96::/108, pods with an address in each family, and the API server on [::1] (every
// kubeconfig says https://[::1]:PORT). Proxies listen on [::1] under each transport; real curl
// reaches an IPv6 ClusterIP, both ClusterIPs of a dual-stack Service, a SingleStack IPv6 Service
// (only IPv6 EndpointSlices), an IPv6 Pod IP and a headless dual-stack Service's pods, through
// SOCKS5 (an IPv6 literal as ATYP 4, names as socks5h), CONNECT [v6]:port and absolute-form
// http://[v6]:port/. Skips with a reason when the bed is not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { once } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import os from 'node:os';
import path from 'node:path';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { httpContainer, manifests, service, statefulSet, webDeployment } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged } from '../helpers/real-cluster-setup.js';
import { startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { runDoctor } from '../helpers/doctor.js';

const skip = skipUnlessRealCluster();

const TRANSPORTS = ['spdy', 'websocket'] as const;
type Transport = (typeof TRANSPORTS)[number];

const webPorts = [{ name: 'http', port: 80, targetPort: 'http' }];
const MANIFESTS = manifests(
  webDeployment(2),
  service('web', { selector: { app: 'web' }, ports: webPorts, ipFamilyPolicy: 'RequireDualStack' }),
  service('web-pref', { selector: { app: 'web' }, ports: webPorts, ipFamilyPolicy: 'PreferDualStack' }),
  service('web6', { selector: { app: 'web' }, ports: webPorts, ipFamilyPolicy: 'SingleStack', ipFamilies: ['IPv6'] }),
  service('db', { clusterIP: 'None', ports: [{ port: 8080 }], ipFamilyPolicy: 'RequireDualStack' }),
  statefulSet({ name: 'db', replicas: 2, serviceName: 'db', containers: [httpContainer('db', 8080, null)] }),
);

let cluster: RealCluster | undefined;
const proxies = new Map<Transport, ProxyProcess>();
let stateDir = '';

type Svc = { spec: { clusterIPs: string[]; ipFamilies: string[] } };
type Pod = { metadata: { name: string }; status: { podIPs: Array<{ ip: string }> } };
const clusterIPs = async (name: string) => (await cluster!.get<Svc>(`/api/v1/namespaces/shop/services/${name}`)).spec;
const pod = (name: string) => cluster!.get<Pod>(`/api/v1/namespaces/shop/pods/${name}`);

before(async () => {
  if (skip) return;
  stateDir = await mkdtemp(path.join(os.tmpdir(), 'proxyout-ipv6-state-'));
  cluster = await startClusterLogged({ dualStack: 'IPv4', apiServerHost: '::1' }, ' (dual-stack, API server on [::1])');
  await applyAndRollOut(cluster, MANIFESTS, ['deployment/web', 'statefulset/db']);
  for (const t of TRANSPORTS) {
    const args = ['--kubeconfig', cluster.kubeconfig, '-n', 'shop', '--listen-socks', '[::1]:0', '--listen-http', '[::1]:0', '--transport', t];
    proxies.set(t, await startProxyProcess([...args, '--log-level', 'debug']));
  }
});

after(async () => {
  for (const p of proxies.values()) assert.equal(await p.stop(), 0, 'the proxy exits 0 on SIGTERM');
  await cluster?.stop();
  if (stateDir) await rm(stateDir, { recursive: true, force: true });
});

test('the bed: dual-stack Services, pods with an address per family, one EndpointSlice per family, the API server on [::1]', { skip }, async () => {
  assert.match(cluster!.server, /^https:\/\/\[::1\]:\d+$/);
  const web = await clusterIPs('web');
  assert.deepEqual(web.ipFamilies, ['IPv4', 'IPv6']);
  assert.match(web.clusterIPs[0]!, /^10\.96\./);
  assert.match(web.clusterIPs[1]!, /^fd00:96::/);
  assert.deepEqual((await clusterIPs('web6')).ipFamilies, ['IPv6']);
  const ips = (await pod('db-0')).status.podIPs.map((p) => p.ip);
  assert.equal(ips.length, 2);
  assert.match(ips[0]!, /^10\.244\.1\.\d+$/);
  assert.match(ips[1]!, /^fd00:10:244:1::[0-9a-f]+$/);
  type Slices = { items: Array<{ addressType: string; metadata: { labels: Record<string, string> } }> };
  const slices = await cluster!.get<Slices>('/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices');
  const families = (svc: string) =>
    slices.items
      .filter((s) => s.metadata.labels['kubernetes.io/service-name'] === svc)
      .map((s) => s.addressType)
      .sort();
  assert.deepEqual(families('web'), ['IPv4', 'IPv6']);
  assert.deepEqual(families('db'), ['IPv4', 'IPv6']);
  assert.deepEqual(families('web6'), ['IPv6']);
  const proxy = proxies.get('spdy')!;
  assert.match(proxy.socks!, /^\[::1\]:\d+$/);
  assert.ok(
    proxy.stdout.some((l) => /^export NO_PROXY='localhost,127\.0\.0\.1,::1,\[::1\]'$/.test(l)),
    proxy.stdout.join('\n'),
  );
});

for (const t of TRANSPORTS) {
  test(`${t}: IPv6 ClusterIPs, both of a dual-stack Service, an IPv6 Pod IP and headless pod names through SOCKS5 and HTTP`, { skip }, async () => {
    const proxy = proxies.get(t)!;
    const [web, pref, web6] = await Promise.all([clusterIPs('web'), clusterIPs('web-pref'), clusterIPs('web6')]);
    const db0 = (await pod('db-0')).status.podIPs[1]!.ip;
    const bracket = (ip: string) => (ip.includes(':') ? `[${ip}]` : ip);
    const forms: Array<[string, RegExp]> = [
      ...[...web.clusterIPs, ...pref.clusterIPs, ...web6.clusterIPs].map((ip): [string, RegExp] => [`http://${bracket(ip)}/`, /^web-/]),
      ['http://web6.shop/', /^web-/],
      [`http://${bracket(db0)}:8080/`, /^db-0$/],
      ['http://db-1.db.shop.svc.cluster.local:8080/', /^db-1$/],
      [`http://${db0.replaceAll(':', '-')}.shop.pod.cluster.local:8080/`, /^db-0$/],
      ['http://db.shop.svc.cluster.local:8080/', /^db-[01]$/],
    ];
    for (const [url, who] of forms) {
      const ways = [
        ['--proxy', `socks5h://${proxy.socks}`],
        ['-p', '-x', `http://${proxy.http}`],
        ['-x', `http://${proxy.http}`],
      ];
      // curl sends an IP literal to a socks5:// proxy as ATYP 1 or 4.
      if (url.startsWith('http://[') || /^http:\/\/\d/.test(url)) ways.push(['--proxy', `socks5://${proxy.socks}`]);
      for (const via of ways) {
        const r = await curl(['-sS', '-m', '10', ...via, url]);
        assert.equal(r.code, 0, `curl ${via.join(' ')} ${url}: ${r.stderr}`);
        const m = /^pod=(\S+) namespace=shop port=8080$/m.exec(r.stdout);
        assert.ok(m, `${url} via ${via.join(' ')}: ${r.stdout}`);
        assert.match(m[1]!, who, `${url} via ${via.join(' ')}`);
      }
    }
    // ATYP 4, and the reply's bound address: the [::1] listener's.
    const s = await socks5Connect(proxy.socks!, web.clusterIPs[1]!, 80, { atyp: 'ipv6' });
    assert.equal(s.reply, 0);
    assert.equal(s.bound?.host, '00000000000000000000000000000001', 'bound ::1 (the helper writes IPv6 as hex)');
    s.socket.destroy();
    const opened = proxy.logs.filter((l) => l.msg === 'stream open');
    assert.ok(opened.length > 0 && opened.every((l) => l.transport === t), 'the streams rode the transport asked for');
  });
}

test('doctor against the API server on [::1], with and without an extra CA', { skip }, async () => {
  for (const extra of [[], ['--extra-ca', path.join(cluster!.dir, 'pki', 'ca.crt')]]) {
    const d = await runDoctor(['--kubeconfig', cluster!.kubeconfig, ...extra], stateDir);
    const api = d.get('api-server');
    assert.equal(api.status, 'ok', `${extra.join(' ')}: ${api.detail}`);
    assert.match(api.detail, /https:\/\/\[::1\]:\d+ answers: v1\.37\.2/);
    assert.equal(d.get('port-forward').status, 'ok', d.out);
  }
});

test('an API server on [::1] that goes away: the warnings name it [::1]:PORT, as kubectl does', { skip }, async () => {
  // A TCP hop on [::1] in front of the API server, closed under running proxies.
  const open = new Set<net.Socket>();
  const apiPort = Number(new URL(cluster!.server).port);
  const hop = net.createServer((c) => {
    const u = net.connect(apiPort, '::1');
    for (const s of [c, u]) {
      open.add(s);
      s.on('error', () => {});
      s.once('close', () => open.delete(s));
    }
    c.pipe(u).pipe(c);
  });
  hop.listen(0, '::1');
  await once(hop, 'listening');
  const port = (hop.address() as net.AddressInfo).port;
  const kubeconfig = path.join(stateDir, 'kubeconfig-hop');
  await writeFile(kubeconfig, (await readFile(cluster!.kubeconfig, 'utf8')).replace(cluster!.server, `https://[::1]:${port}`));
  const started: ProxyProcess[] = [];
  try {
    for (const t of TRANSPORTS) {
      started.push(await startProxyProcess(['--kubeconfig', kubeconfig, '-n', 'shop', '--listen-socks', '[::1]:0', '--transport', t]));
    }
    hop.close();
    for (const s of open) s.destroy();
    for (const p of started) {
      const r = await curl(['-sS', '-m', '10', '--proxy', `socks5h://${p.socks}`, 'http://web/']);
      assert.notEqual(r.code, 0, 'no API server, no stream');
    }
    await delay(1_500);
    for (const p of started) {
      const warnings = p.logs.filter((l) => Number(l.level) >= 40).map((l) => JSON.stringify(l));
      assert.ok(
        warnings.some((w) => w.includes(`ECONNREFUSED [::1]:${port}`)),
        warnings.join('\n'),
      );
      // Node's own words were "connect ECONNREFUSED ::1:PORT".
      assert.deepEqual(
        warnings.filter((w) => w.includes(` ::1:${port}`)),
        [],
      );
    }
  } finally {
    hop.close();
    for (const p of started) await p.stop();
  }
});
