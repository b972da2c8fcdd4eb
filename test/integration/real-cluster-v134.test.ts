// The real CLI against an older control plane: kube-apiserver, kube-controller-manager and
// kube-scheduler v1.34.4 (test/real-cluster-v1.34), behind a node that does not tunnel SPDY in a
// WebSocket, as a v1.34 kubelet. First as upstream v1.34 runs by default — PortForwardWebsockets
// and WatchList are beta and on: the API server translates the WebSocket tunnel itself and streams
// initial events — then with the API server restarted with both gates off (etcd compacted while it
// was down): the per-stream WebSocket and the paged lists serve. One cluster; a proxy per
// transport; real kubectl, real curl. Skips with a reason when the v1.34 binaries are not built
// (fails instead under PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, endpointSliceReadyMs, startClusterLogged, startProxies, stopProxiesAndCluster, webAddresses } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';
import { runDoctor } from '../helpers/doctor.js';

const skip = skipUnlessRealCluster('v1.34');

const TRANSPORTS = ['spdy', 'websocket', 'auto'] as const;
type Transport = (typeof TRANSPORTS)[number];

const MANIFESTS = manifests(webDeployment(2), webService());

const GATES_OFF = '--feature-gates=PortForwardWebsockets=false,WatchList=false';
const NO_TUNNEL = 'the API server does not offer the SPDY port-forward tunnel; using one WebSocket per stream (v4.channel.k8s.io) for this cluster';
const NO_WATCH_LIST = 'the API server does not stream initial events (watch-list); listing in pages';

let cluster: RealCluster | undefined;
let proxies = new Map<Transport, ProxyProcess>();
let webClusterIP = '';
let webPodIP = '';
let webPodName = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged({ version: 'v1.34' });
  await applyAndRollOut(cluster, MANIFESTS, ['deployment/web']);
  ({ clusterIP: webClusterIP, podName: webPodName, podIP: webPodIP } = await webAddresses(cluster));
  proxies = await startProxies(cluster, TRANSPORTS);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

const proxy = (t: Transport) => proxies.get(t)!;
const servedBy = (body: string) => /^pod=(\S+) namespace=(\S+) port=(\d+)$/m.exec(body);
const logged = (t: Transport, msg: string) => proxy(t).logs.filter((l) => l.msg === msg);

/** Each destination form through SOCKS5 (socks5h) and HTTP CONNECT: the pod that answered. */
async function reachEveryForm(t: Transport): Promise<void> {
  const forms: Array<[string, string | undefined]> = [
    ['http://web/', undefined],
    ['http://web.shop/', undefined],
    ['http://web.shop.svc.cluster.local/', undefined],
    [`http://${webClusterIP}/`, undefined],
    [`http://${webPodIP}:8080/`, webPodName],
  ];
  for (const [url, pod] of forms) {
    for (const via of [
      ['--proxy', `socks5h://${proxy(t).socks}`],
      ['-p', '-x', `http://${proxy(t).http}`],
    ]) {
      const r = await curl([...via, url]);
      assert.equal(r.code, 0, `curl ${via.join(' ')} ${url}: ${r.stderr}`);
      const m = servedBy(r.stdout);
      assert.ok(m, `${url} answered by a pod: ${r.stdout}`);
      assert.match(m[1], pod ? new RegExp(`^${pod}$`) : /^web-[a-z0-9]+-[a-z0-9]+$/);
      assert.deepEqual([m[2], m[3]], ['shop', '8080'], 'Service port 80 → named targetPort http = 8080');
    }
  }
}

/** Creates a Service like web and times until it answers through `t`; also when its EndpointSlice first had a ready endpoint. */
async function timeNewService(tc: TestContext, name: string, transports: Transport[]): Promise<{ ms: Map<Transport, number>; sliceMs: number }> {
  const c = cluster!;
  await c.kubectl(['apply', '-f', '-'], { input: manifests(webService(name)) });
  const created = Date.now();
  const slicePoll = endpointSliceReadyMs(c, name, created);
  const ms = new Map<Transport, number>();
  await Promise.all(
    transports.map(async (t) => {
      for (;;) {
        const r = await curl(['--proxy', `socks5h://${proxy(t).socks}`, `http://${name}.shop/`], 5_000);
        if (r.code === 0 && /^pod=web-/m.test(r.stdout)) break;
        if (Date.now() - created > 30_000) assert.fail(`${name}.shop not reachable through ${t} within 30 s: ${r.stderr}`);
        await delay(100);
      }
      ms.set(t, Date.now() - created);
    }),
  );
  const sliceMs = await slicePoll;
  const line = `${name}: reachable ${[...ms].map(([t, n]) => `${n} ms (${t})`).join(', ')} after it was created; its EndpointSlice had a ready endpoint after ${sliceMs ?? '?'} ms`;
  tc.diagnostic(line);
  console.log(`# ${line}`);
  return { ms, sliceMs: sliceMs ?? Math.max(...ms.values()) };
}

describe('real cluster v1.34.4, upstream defaults (PortForwardWebsockets and WatchList on)', { skip }, () => {
  test('the API server is v1.34.4', async () => {
    const v = await cluster!.get<{ gitVersion: string; major: string; minor: string }>('/version');
    assert.deepEqual([v.gitVersion, v.major, v.minor], ['v1.34.4', '1', '34']);
  });

  for (const t of TRANSPORTS) {
    test(`every destination form through SOCKS5 and CONNECT (--transport ${t})`, () => reachEveryForm(t));
  }

  test('auto uses the SPDY tunnel: the API server translates the WebSocket itself, the kubelet need not tunnel', () => {
    for (const t of ['auto', 'spdy'] as const) {
      assert.ok(
        logged(t, 'tunnel opened').some((l) => l.transport === 'spdy'),
        `${t}: an SPDY tunnel opened`,
      );
    }
    assert.deepEqual(logged('auto', NO_TUNNEL), [], 'auto did not fall back');
  });

  test('the caches stream their initial events (watch-list), no paged list', () => {
    for (const t of TRANSPORTS) {
      const synced = logged(t, 'watch synced');
      assert.ok(synced.length > 0, `${t}: watches synced`);
      assert.deepEqual([...new Set(synced.map((l) => l.by))], ['watch-list'], `${t}: every watch synced by a watch-list`);
      assert.deepEqual([...logged(t, NO_WATCH_LIST), ...logged(t, 'watch-list failed; listing in pages this time')], [], `${t}: no fallback`);
    }
  });

  test('doctor: all three port-forward protocols offered; RBAC cluster-wide for admin, one namespace for the limited user', async () => {
    const c = cluster!;
    const state = path.join(c.dir, 'doctor-state');
    const admin = await runDoctor(['--kubeconfig', c.kubeconfig, '--context', 'admin'], state);
    assert.equal(admin.get('rbac').status, 'ok');
    assert.match(admin.get('rbac').detail, /^cluster-wide: list services, watch services, .*, list pods, get pods, get pods\/portforward$/);
    assert.match(admin.get('port-forward').detail, /SPDY over WebSocket: yes; per-stream WebSocket v4: yes; legacy SPDY: yes/);
    const limited = await runDoctor(['--kubeconfig', c.kubeconfig, '--context', 'limited'], state);
    assert.equal(limited.get('rbac').status, 'ok');
    assert.match(limited.get('rbac').detail, /^in namespace shop only \(not cluster-wide/);
  });

  test('a Service created after an etcd compaction is reachable within 2 s', async (t) => {
    // Some churn first, so that the compaction leaves the proxies' watches behind.
    for (let i = 0; i < 3; i++) await cluster!.kubectl(['-n', 'shop', 'annotate', '--overwrite', 'svc/web', `churn=${i}`]);
    t.diagnostic(`compacted at revision ${await cluster!.compact()}`);
    const { ms } = await timeNewService(t, 'after-compact', [...TRANSPORTS]);
    for (const [transport, n] of ms) assert.ok(n <= 2000, `${transport}: reachable after ${n} ms; target 2 s`);
  });
});

describe('real cluster v1.34.4 restarted with PortForwardWebsockets and WatchList off, etcd compacted meanwhile', { skip }, () => {
  before(async () => {
    if (skip) return;
    const c = cluster!;
    for (let i = 0; i < 3; i++) await c.kubectl(['-n', 'shop', 'annotate', '--overwrite', 'svc/web', `churn=r${i}`]);
    const t0 = Date.now();
    await c.restartApiServer({ whileDown: async () => void (await c.compact()), apiServerFlags: [GATES_OFF] });
    console.log(`# API server restarted with ${GATES_OFF} in ${Date.now() - t0} ms`);
  });

  test('the caches relist in pages: the API server refuses the watch-list', async () => {
    for (const t of TRANSPORTS) {
      const deadline = Date.now() + 15_000;
      while (logged(t, NO_WATCH_LIST).length === 0 && Date.now() < deadline) await delay(100);
      const fallback = logged(t, NO_WATCH_LIST);
      assert.ok(fallback.length > 0, `${t}: the watch-list fallback was taken`);
      assert.match(String(fallback[0]!.reason), /sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled/);
    }
  });

  test('--transport auto: the tunnel is refused by the kubelet (400), one WebSocket per stream serves every form', async () => {
    await reachEveryForm('auto');
    const learned = logged('auto', NO_TUNNEL);
    assert.equal(learned.length, 1, 'auto says once that it fell back');
    assert.equal(learned[0]!.answer, 'HTTP 400: query parameter "port" is required');
  });

  test('--transport websocket serves every form; --transport spdy is refused (SOCKS 0x01), saying the API server answered 400 and has no tunnel', async () => {
    await reachEveryForm('websocket');
    const { reply, socket } = await socks5Connect(proxy('spdy').socks!, 'web.shop', 80);
    socket.destroy();
    assert.equal(reply, 0x01);
    await delay(100);
    const failed = proxy('spdy')
      .logs.filter((l) => String(l.msg).startsWith('stream failed'))
      .pop();
    assert.match(
      String(failed?.msg),
      /port-forward tunnel to shop\/web-\S+ refused by the API server \(400\): query parameter "port" is required; this API server does not offer the SPDY port-forward tunnel/,
    );
  });

  test('a Service created after the restart is reachable within 2 s of its EndpointSlice (paged lists)', async (t) => {
    const { ms, sliceMs } = await timeNewService(t, 'after-restart', ['auto', 'websocket']);
    // kube-controller-manager's watches come back after a restart with a backoff: the target is on the proxy's share.
    for (const [transport, n] of ms) assert.ok(n - sliceMs <= 2000, `${transport}: reachable ${n - sliceMs} ms after its EndpointSlice was ready; target 2 s`);
    cluster!.assertHealthy();
  });
});
