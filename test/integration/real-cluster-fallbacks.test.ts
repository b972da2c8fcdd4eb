// The proxy's two fallbacks against upstream code: a kube-apiserver v1.37.2 with the
// PortForwardWebsockets and WatchList feature gates off, and a node that does not tunnel SPDY in
// a WebSocket (an older kubelet). So the SPDY-over-WebSocket tunnel is refused (400 from the
// kubelet's v4 handler) and `--transport auto` uses one WebSocket per stream; the streaming
// watch-list is refused and the caches list in pages. Real kubectl, real curl, the real CLI.
// Skips with a reason when the test bed is not built (fails instead under
// PROXYOUT_REQUIRE_REAL_CLUSTER=1).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, endpointSliceReadyMs, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { curl } from '../helpers/curl.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();

const MANIFESTS = manifests(webDeployment(2), webService());

let cluster: RealCluster | undefined;
let auto: ProxyProcess | undefined;
let spdy: ProxyProcess | undefined;
let proxies = new Map<string, ProxyProcess>();

before(async () => {
  if (skip) return;
  const gatesOff = { apiServerFlags: ['--feature-gates=PortForwardWebsockets=false,WatchList=false'], nodeFlags: ['--websocket-tunnel=false'] };
  cluster = await startClusterLogged(gatesOff, ' (gates off)');
  await applyAndRollOut(cluster, MANIFESTS, ['deployment/web']);
  proxies = await startProxies(cluster, ['auto', 'spdy'] as const);
  auto = proxies.get('auto');
  spdy = proxies.get('spdy');
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

describe('real cluster without PortForwardWebsockets and WatchList, a kubelet that does not tunnel', { skip }, () => {
  test('the caches list in pages: the API server refuses the watch-list', () => {
    const fallback = auto!.logs.filter((l) => l.msg === 'the API server does not stream initial events (watch-list); listing in pages');
    assert.ok(fallback.length > 0, 'the watch-list fallback was taken');
    assert.match(String(fallback[0]!.reason), /sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled/);
  });

  test('--transport auto: the tunnel is refused, one WebSocket per stream serves', async () => {
    for (const name of ['web', 'web.shop.svc.cluster.local']) {
      const r = await curl(['--proxy', `socks5h://${auto!.socks}`, `http://${name}/`]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^pod=web-\S+ namespace=shop port=8080$/m);
    }
    const r = await curl(['-p', '-x', `http://${auto!.http}`, 'http://web.shop/']);
    assert.equal(r.code, 0, r.stderr);
    const learned = auto!.logs.find((l) => String(l.msg).startsWith('the API server does not offer the SPDY port-forward tunnel'));
    assert.ok(learned, 'auto says it fell back');
    assert.equal(learned.answer, 'HTTP 400: query parameter "port" is required');
  });

  test('--transport auto: a pod port nothing listens on is refused (0x05) through the per-stream WebSocket', async () => {
    const pods = JSON.parse((await cluster!.kubectl(['-n', 'shop', 'get', 'pods', '-l', 'app=web', '-o', 'json'])).stdout) as {
      items: Array<{ status: { podIP?: string } }>;
    };
    const ip = pods.items.find((p) => p.status.podIP)!.status.podIP!;
    const { reply, socket } = await socks5Connect(auto!.socks!, ip, 9999);
    socket.destroy();
    assert.equal(reply, 0x05);
  });

  test('--transport spdy: refused with SOCKS 0x01, saying the API server answered 400 and has no tunnel', async () => {
    const { reply, socket } = await socks5Connect(spdy!.socks!, 'web.shop', 80);
    socket.destroy();
    assert.equal(reply, 0x01);
    await delay(100);
    const failed = spdy!.logs.find((l) => String(l.msg).startsWith('stream failed'));
    assert.match(
      String(failed?.msg),
      /port-forward tunnel to shop\/web-\S+ refused by the API server \(400\): query parameter "port" is required; this API server does not offer the SPDY port-forward tunnel: use --transport auto or websocket/,
    );
  });

  test('a Service created after an API server restart with etcd compacted is reachable within 2 s of its EndpointSlice (paged lists)', async (t) => {
    const c = cluster!;
    for (let i = 0; i < 3; i++) await c.kubectl(['-n', 'shop', 'annotate', '--overwrite', 'svc/web', `churn=${i}`]);
    await c.restartApiServer({ whileDown: async () => void (await c.compact()) });
    await c.kubectl(['apply', '-f', '-'], { input: manifests(webService('after-compact')) });
    const created = Date.now();
    const slicePoll = endpointSliceReadyMs(c, 'after-compact', created);
    for (;;) {
      const r = await curl(['--proxy', `socks5h://${auto!.socks}`, 'http://after-compact.shop/'], 5_000);
      if (r.code === 0 && /^pod=web-/m.test(r.stdout)) break;
      if (Date.now() - created > 30_000) assert.fail(`after-compact.shop not reachable within 30 s: ${r.stderr}`);
      await delay(100);
    }
    const ms = Date.now() - created;
    const sliceMs = await slicePoll;
    const line = `gates off: after-compact reachable ${ms} ms after it was created; its EndpointSlice had a ready endpoint after ${sliceMs ?? '?'} ms (API server restarted, etcd compacted while it was down)`;
    t.diagnostic(line);
    console.log(`# ${line}`);
    // kube-controller-manager's watches come back after a restart with a backoff: the target is on the proxy's share.
    assert.ok(ms - (sliceMs ?? ms) <= 2000, `reachable ${ms - (sliceMs ?? ms)} ms after its EndpointSlice was ready; target 2 s`);
  });
});
