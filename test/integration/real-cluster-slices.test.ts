// A Service whose endpoints the real EndpointSlice controller spreads over several slices (here
// --max-endpoints-per-slice=3, as 100 is upstream's default: the same shape with fewer pods), judged
// by the pod that answers (proxyout/http names it): every endpoint of every slice takes
// connections, as kube-proxy spreads over them all, and a slice deleted under held streams (the
// controller writes it anew) ends none of them. Skips with a reason when the test bed is not built.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, webDeployment, webService } from '../helpers/real-cluster-objects.js';
import { applyAndRollOut, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { Reader, socks5Connect } from '../helpers/socks-client.js';
import { eventually } from '../helpers/cluster.js';
import type net from 'node:net';

const skip = skipUnlessRealCluster();
const REPLICAS = 7;

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged({ controllerManagerFlags: ['--max-endpoints-per-slice=3'] });
  await applyAndRollOut(cluster, manifests(webDeployment(REPLICAS), webService()), ['deployment/web']);
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

type Slices = { items: Array<{ metadata: { name: string }; endpoints?: Array<{ targetRef?: { name: string } }> }> };
const slicesPath = '/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb';

/** One keep-alive HTTP/1.1 connection through SOCKS5 to web.shop:80: ask() sends a request and reads the pod's answer. */
async function open(): Promise<{ socket: net.Socket; ask: () => Promise<string> }> {
  const { reply, socket, rest } = await socks5Connect(proxies.get('spdy')!.socks!, 'web.shop', 80);
  assert.equal(reply, 0, 'SOCKS reply');
  const reader = new Reader(socket);
  let pending = rest;
  const ask = async () => {
    socket.write('GET / HTTP/1.1\r\nHost: web\r\n\r\n');
    let head = pending.toString('latin1');
    pending = Buffer.alloc(0);
    while (!head.includes('\r\n\r\n')) head += (await reader.read(1)).toString('latin1');
    const [headers, start] = head.split('\r\n\r\n') as [string, string];
    const length = Number(/content-length: *(\d+)/i.exec(headers)?.[1]);
    assert.ok(length > 0, headers);
    const body = start + (await reader.read(length - start.length)).toString('latin1');
    return /pod=(\S+)/.exec(body)?.[1] ?? body;
  };
  return { socket, ask };
}

test('a Service spread over several EndpointSlices: new connections reach the pods of every slice', { skip }, async () => {
  const slices = await cluster!.get<Slices>(slicesPath);
  assert.ok(slices.items.length >= 3, `the controller wrote ${slices.items.length} slices`);
  const seen = new Set<string>();
  for (let i = 0; i < REPLICAS; i++) {
    const c = await open();
    seen.add(await c.ask());
    c.socket.destroy();
  }
  const all = slices.items.flatMap((s) => (s.endpoints ?? []).map((e) => e.targetRef?.name ?? ''));
  assert.deepEqual([...seen].sort(), all.sort(), 'one connection to each pod, in turn');
});

test('a slice deleted while streams through it run (the controller writes it anew): they go on, and its pods are used again', { skip }, async () => {
  const held = [];
  for (let i = 0; i < REPLICAS; i++) {
    const c = await open();
    held.push({ ...c, pod: await c.ask() });
  }
  const slices = await cluster!.get<Slices>(slicesPath);
  const victim = slices.items[0]!;
  const victimPods = new Set((victim.endpoints ?? []).map((e) => e.targetRef?.name));
  await cluster!.kubectl(['-n', 'shop', 'delete', 'endpointslice', victim.metadata.name]);
  await eventually(async () => {
    const now = await cluster!.get<Slices>(slicesPath);
    const listed = now.items.filter((s) => s.metadata.name !== victim.metadata.name).flatMap((s) => (s.endpoints ?? []).map((e) => e.targetRef?.name));
    return [...victimPods].every((p) => listed.includes(p));
  }, 10_000);
  for (const c of held) assert.equal(await c.ask(), c.pod, `the stream to ${c.pod} goes on`);
  for (const c of held) c.socket.destroy();
  const seen = new Set<string>();
  for (let i = 0; i < REPLICAS; i++) {
    const c = await open();
    seen.add(await c.ask());
    c.socket.destroy();
  }
  for (const pod of victimPods) assert.ok(seen.has(pod!), `${pod} is used again`);
});
