// The node dies under a warm SPDY tunnel (the node stand-in killed: a kubelet that crashes or
// restarts while its pods run). The API server keeps our tunnel's WebSocket open and ends it only
// when we next write on it — typically the SYN_STREAMs of a new stream to that pod, which a port
// that accepted lately calls open before the kubelet replies. That stream never reached the pod:
// it must fail (retryable, for the route to move it), not end as if the pod had closed it at
// once. Skips with a reason when the real-cluster binaries are not built.
import { after, before, test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as delay } from 'node:timers/promises';
import { skipUnlessRealCluster, type RealCluster } from '../helpers/real-cluster.js';
import { manifests, pod } from '../helpers/real-cluster-objects.js';
import { endpointSlicesCaughtUp, startClusterLogged, startProxies, stopProxiesAndCluster } from '../helpers/real-cluster-setup.js';
import type { ProxyProcess } from '../helpers/proxy-process.js';
import { socks5Connect } from '../helpers/socks-client.js';

const skip = skipUnlessRealCluster();
const ECHO = pod({ name: 'echo', containers: [{ name: 'echo', image: 'proxyout/echo', ports: [{ containerPort: 7000 }] }] });

let cluster: RealCluster | undefined;
let proxies = new Map<'spdy', ProxyProcess>();
let echoIP = '';

before(async () => {
  if (skip) return;
  cluster = await startClusterLogged();
  await cluster.kubectl(['apply', '-f', '-'], { input: manifests(ECHO) });
  await cluster.kubectl(['-n', 'shop', 'wait', '--for=condition=Ready', 'pod/echo', '--timeout=60s']);
  await endpointSlicesCaughtUp(cluster);
  echoIP = (await cluster.get<{ status: { podIP: string } }>('/api/v1/namespaces/shop/pods/echo')).status.podIP;
  proxies = await startProxies(cluster, ['spdy'] as const);
});

after(async () => {
  const codes = await stopProxiesAndCluster(cluster, proxies);
  for (const code of codes) assert.equal(code, 0, 'the proxy exits 0 on SIGTERM');
});

/** Sends `hello` and FIN; what came back and how the stream ended for the client. */
async function exchange(socks: string): Promise<{ reply: number; answer: string; ended: 'end' | 'error' }> {
  const { reply, socket, rest } = await socks5Connect(socks, echoIP, 7000);
  if (reply !== 0) return { reply, answer: '', ended: 'error' };
  const chunks: Buffer[] = [rest];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise<'end' | 'error'>((resolve) => {
    socket.once('end', () => resolve('end'));
    socket.once('error', () => resolve('error'));
  });
  socket.resume();
  socket.end('hello');
  const how = await ended;
  socket.destroy();
  return { reply, answer: Buffer.concat(chunks).toString(), ended: how };
}

test('spdy: a stream opened on the tunnel of a node that just died fails; it does not end as an empty answer', { timeout: 30_000 }, async (t: TestContext) => {
  if (skip) return t.skip(skip);
  const proxy = proxies.get('spdy')!;
  assert.deepEqual(await exchange(proxy.socks!), { reply: 0, answer: 'hello', ended: 'end' }, 'warm: the port accepted lately');
  await cluster!.killNode();
  await delay(200);
  const since = proxy.logs.length;
  const after = await exchange(proxy.socks!);
  t.diagnostic(JSON.stringify(after));
  assert.equal(after.answer, '', 'nothing can come from a pod whose node is gone');
  await delay(500);
  const lines = proxy.logs.slice(since);
  assert.ok(
    lines.some((l) => l.msg === 'stream closed with error' || String(l.msg).startsWith('stream failed')),
    `the stream failed: ${JSON.stringify(lines.map((l) => [l.msg, l.error]))}`,
  );
  assert.ok(!lines.some((l) => l.msg === 'stream closed'), 'no clean end, as if the pod had answered nothing and closed');
});
